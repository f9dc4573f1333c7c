package durability

import (
	"context"
	"errors"
	"fmt"
)

// ErrClosed is the cause of the *StoreError returned by every Store method
// called after Close.
var ErrClosed = errors.New("store closed")

// ErrInvalidName is the cause of the *StoreError returned by every Store
// method called with an empty actor name.
var ErrInvalidName = errors.New("invalid actor name")

// ErrIndexOverflow is the cause of the *StoreError returned by
// PersistEvents for a batch whose last index would be past the largest
// uint64.
var ErrIndexOverflow = errors.New("event index overflows uint64")

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

// Error implements error.
func (e *StoreError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("durability: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("durability: %s %q: %v", e.Op, e.Name, e.Err)
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
