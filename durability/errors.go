package durability

import (
	"context"
	"errors"
	"fmt"

	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// ErrClosed is the cause of the *StoreError returned by every Store method
// called after Close.
var ErrClosed = errors.New("store closed")

// ErrInvalidName is the cause of the *StoreError returned by every Store
// method called with an empty actor name, or one longer than the store's
// limit (see [InvalidName]).
var ErrInvalidName = errors.New("invalid actor name")

// InvalidName returns the cause of the *StoreError a store returns for
// an actor name it refuses: [ErrInvalidName] for an empty name, and for
// a name longer than limit bytes (the store's own limit) an error
// wrapping it that says the name's length and the limit.
func InvalidName(name string, limit int) error {
	if name == "" {
		return ErrInvalidName
	}
	return fmt.Errorf("actor name of %d bytes, longer than the store's limit of %d: %w", len(name), limit, ErrInvalidName)
}

// ErrIndexOverflow is the cause of the *StoreError returned by
// PersistEvents for a batch whose last index would be past the largest
// uint64.
var ErrIndexOverflow = errors.New("event index overflows uint64")

// ErrDamaged is the cause, through a *[DamageError], of every error a
// store returns for stored data that fails its checks: a record whose
// checksum does not match, a file whose structure is broken. Test for it
// with errors.Is. Such an error is never retryable: reading the data
// again fails the same way until the store is repaired (see [Salvager]).
var ErrDamaged = errors.New("damaged")

// ErrOutcomeUnknown is the cause (beside the failure's own) of the error
// a write returns when the store cannot tell whether it committed: a store
// that reaches its data over a connection sent the write, and then the
// connection was lost, or the caller's context or the store's Close ended
// the wait, before the server answered. Unlike every other error of a
// write, it does not mean "not persisted": the write may have committed.
// The caller acts as if neither were known and learns the truth by
// reading through the same store, which waits until the write can no
// longer commit (another process learns it only after a fence, see the
// Durability section of [Store]): a durable stage fails (its [Provider]
// panics with the error) and is recovered from what the store holds.
// Stores that hold their data
// in this process (memstore, boltstore) never return it.
var ErrOutcomeUnknown = errors.New("outcome unknown: the write may or may not have committed")

// ErrLocked is the cause of the error Open returns for a store file that
// another process (or another open store in this process) holds.
var ErrLocked = errors.New("locked by another process")

// DamageError describes damaged stored data: which store, what (a record
// of a kind at an index, or a part of a file) and why it was found
// damaged. errors.Is(err, ErrDamaged) is true for it. The actor name is in
// the enclosing *[StoreError].
type DamageError struct {
	Store  string // the store: a file path, or a store's own name such as "memstore"
	What   string // "event", "snapshot", "log entry", "file", "meta page", "page", ...
	Index  uint64 // the record's index (or log sequence, or page number), if HasIndex
	Offset int64  // byte offset in the file, or -1 when unknown
	Reason string // the check that failed, e.g. "checksum mismatch"

	HasIndex bool
}

// Error implements error.
func (e *DamageError) Error() string {
	what := e.What
	if e.HasIndex {
		what = fmt.Sprintf("%s %d", what, e.Index)
	}
	at := ""
	if e.Offset >= 0 {
		at = fmt.Sprintf(" (at byte %d)", e.Offset)
	}
	return fmt.Sprintf("%s: %s%s is damaged: %s", e.Store, what, at, e.Reason)
}

// Is reports whether target is [ErrDamaged].
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// Damaged returns the *DamageError for a record of kind at index in
// store that failed its check for reason.
func Damaged(store string, kind RecordKind, index uint64, reason string) *DamageError {
	return &DamageError{Store: store, What: kind.String(), Index: index, HasIndex: true, Offset: -1, Reason: reason}
}

// Operation names used in [StoreError.Op].
const (
	OpPersistEvent    = "persist event"
	OpPersistEvents   = "persist events"
	OpGetEvents       = "get events"
	OpDeleteEvents    = "delete events"
	OpPersistSnapshot = "persist snapshot"
	OpGetSnapshot     = "get snapshot"
	OpDeleteSnapshots = "delete snapshots"
	OpEncode          = "encode"
	OpDecode          = "decode"
	OpOpen            = "open"
)

// StoreError is the error returned by Store implementations and the value
// that [Provider] panics with. It records the operation, the actor name and
// the cause; errors.Is and errors.As see through it to the cause.
//
// A StoreError is immutable once built and safe to share between goroutines.
type StoreError struct {
	Op   string // one of the Op constants, or a store-specific operation
	Name string // actor name; empty for store-wide failures
	Err  error  // the cause; never nil in errors built by this module
}

// Error implements error. It quotes the actor name whole up to 256
// bytes, with control bytes and invalid UTF-8 escaped; a longer name (a
// store may take names of 32 KiB) is quoted in part, cut on a rune's
// boundary and followed by a marker that says it was clipped and the
// name's whole length.
func (e *StoreError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("durability: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("durability: %s %s: %v", e.Op, quote.Name(e.Name, "actor name"), e.Err)
}

// Unwrap returns the cause.
func (e *StoreError) Unwrap() error { return e.Err }

// Retryable reports whether repeating the operation may succeed without
// changing anything but time or the context: true when the cause is a
// context cancellation or deadline, or reports itself as temporary through a
// Temporary() bool method. A closed store, an invalid argument, undecodable
// data or a failing disk are not retryable.
func (e *StoreError) Retryable() bool {
	if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Temporary() bool }
	return errors.As(e.Err, &t) && t.Temporary()
}

// IsRetryable reports whether err is, or wraps, a *StoreError whose
// Retryable method returns true.
func IsRetryable(err error) bool {
	var se *StoreError
	return errors.As(err, &se) && se.Retryable()
}

// Permanent marks err as a failure that repeating the operation cannot
// cure (a store that refuses the caller for good: a missing privilege, a
// read-only database), for [IsPermanent]. errors.Is and errors.As see
// through it to err, and its message is err's. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// permanentError is an error marked by Permanent.
type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() error   { return e.err }
func (e permanentError) Permanent() bool { return true }

// IsPermanent reports whether err says that repeating the operation
// cannot succeed: it is, or wraps, [ErrClosed], [ErrInvalidName],
// [ErrIndexOverflow] or [ErrDamaged], or an error with a Permanent() bool
// method that returns true (as those of [Permanent] do). Any other error
// (nil included) is not: a failure that a store does not classify may
// pass. IsPermanent and [IsRetryable] are not opposites: an error may be
// neither, and a caller that retries such an error should bound its
// retries.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidName) || errors.Is(err, ErrIndexOverflow) || errors.Is(err, ErrDamaged) {
		return true
	}
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// QuoteName quotes an actor name for a message or a report as
// [StoreError] does: whole up to 256 bytes, with control bytes and invalid
// UTF-8 escaped as %q escapes them; a longer name is quoted in part, cut
// on a rune's boundary and followed by a marker that gives its whole
// length and says it was clipped, so that a line that names an actor
// stays one readable line of bounded length.
func QuoteName(name string) string {
	return quote.Name(name, "actor name")
}
