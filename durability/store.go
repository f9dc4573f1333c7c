package durability

import "context"

// MaxNameLen is the longest actor name (in bytes) that every Store of
// this module accepts: the smallest of their limits (pgstore's, whose
// names are a primary-key column). Code that makes actor names from
// what it is given (a session id, say) and may run on any of the stores
// keeps its names within it; each store's own MaxNameLen is at least
// this.
const MaxNameLen = 1024

// Store persists, per actor name, an ordered log of events and snapshots of
// the actor's state taken at an event index. Events and snapshots are opaque
// bytes at this level; [NewProvider] adds protobuf encoding on top.
//
// # Indexes and snapshots
//
// Events are addressed by a non-negative index. A snapshot taken at index i
// stands for the state after applying events [0, i): recovery loads the newest
// snapshot (the one with the highest index) and then replays events from i on,
// including event i itself. This is protoactor's convention.
//
// # Compaction
//
// Unless the store is configured to keep history, PersistSnapshot at index i
// also removes, in the same atomic step, every event with an index below i and
// every snapshot with an index below i. Nothing that recovery from the new
// snapshot needs is removed.
//
// # Durability
//
// A successful PersistEvent, PersistEvents or PersistSnapshot means the data is durable by the
// store's own standard (for an on-disk store: written and fsync'd). Callers
// persist first and act afterwards. Once a write was handed to the store, the
// call waits for its outcome even if ctx is cancelled meanwhile, so that a nil
// error always means "persisted" and a non-nil one "not persisted", with
// one exception: a store that reaches its data over a connection (pgstore)
// cannot always tell, and then says so with an error wrapping
// [ErrOutcomeUnknown], which may mean either. A read through the same
// store tells which: until the write can no longer commit, the store's
// reads and writes of that actor wait (and fail with ErrOutcomeUnknown
// too if their own ctx ends first), so a read never shows the write
// absent and then sees it commit. Another process cannot rely on its own
// read for this (the write may commit after it); only a fence taken
// after it settles the question across processes (pgstore's Claim). Such
// a store also bounds the wait by ctx once the write was sent, since a
// silent server would otherwise hold the caller for ever.
//
// # Data ownership
//
// A store does not retain the data slice passed to a persist call after it
// returns. The slices handed to GetEvents' callback and returned by GetSnapshot
// belong to the caller.
//
// # Errors
//
// Every error a store returns, other than a GetEvents callback's own error
// passed through, is a *[StoreError] (use [errors.As]) whose cause says
// what happened: [ErrClosed] after Close, [ErrInvalidName] for an
// empty name or one longer than the store's limit (its MaxNameLen:
// 1 KiB for memstore and pgstore, 32 KiB for boltstore; names within
// [MaxNameLen] fit them all; the error
// says the name's length and the limit), ctx.Err() when the
// context was done before the call started, a *[DamageError] (wrapping
// [ErrDamaged]) for damaged data.
//
// # Damaged data
//
// A store keeps with every event and snapshot a checksum over its key
// and its data ([Checksum]: the record's kind, actor name and index, then
// the data), writes it with the record and checks it on every read, so a
// record damaged where it is kept, or found under another key, is never
// returned. A read that meets one fails with a *StoreError naming the
// actor, whose cause is a *DamageError naming the store and the record's
// kind and index; GetSnapshot does not fall back to an older snapshot
// when the newest is damaged. Reads of the actor that do not include the
// damaged record may succeed, or fail the same way when the store sets
// the whole actor aside; other actors are not affected. A store never
// drops damaged records on its own: a [Salvager] does it on request.
// durabilitytest's RunDamagedValues checks all of this.
//
// # Concurrency
//
// All methods are safe for concurrent use by multiple goroutines, including
// Close. Each write is atomic (a snapshot with its compaction); concurrent
// writes to the same name are applied in some order, and a write that
// returned is seen by every call that starts after it, as is a write
// that a call has seen, once that call returned: what is seen does not
// go back. Callbacks passed to GetEvents may call other
// methods of the store, but not Close.
type Store interface {
	// PersistEvent stores data as the event at index for name, replacing any
	// event already stored at that index, and returns once it is durable.
	PersistEvent(ctx context.Context, name string, index uint64, data []byte) error

	// PersistEvents stores data[k] as the event at index first+k for name,
	// replacing any events already stored at those indexes, as one atomic
	// write: after a crash either every event of the batch is stored or
	// none is. It returns once the batch is durable. An on-disk store makes
	// the batch one durable write (for boltstore, one entry in a group
	// commit), so an actor that persists the events of one turn together
	// pays for one write, not one per event. An empty batch stores nothing
	// and returns nil (after the same checks as any call: name, closed
	// store, context). A batch whose indexes would pass the largest uint64
	// is refused with [ErrIndexOverflow] and stores nothing.
	PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error

	// GetEvents calls fn for each event of name with from <= index < to, in
	// ascending index order. A to of 0 means no upper bound. If fn returns an
	// error, iteration stops and GetEvents returns that error unchanged.
	// Events persisted while GetEvents runs may or may not be seen.
	GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error

	// DeleteEvents removes the events of name with index <= through.
	DeleteEvents(ctx context.Context, name string, through uint64) error

	// PersistSnapshot stores data as the snapshot of name at index (the state
	// after events [0, index)), compacts as described on [Store], and returns
	// once it is durable.
	PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error

	// GetSnapshot returns the snapshot of name with the highest index. ok is
	// false, with a nil error, when name has no snapshot.
	GetSnapshot(ctx context.Context, name string) (snap Snapshot, ok bool, err error)

	// DeleteSnapshots removes the snapshots of name with index <= through.
	DeleteSnapshots(ctx context.Context, name string, through uint64) error

	// Close releases the store's resources after waiting for writes already
	// handed to it. Calls made after Close fail with [ErrClosed]. Close is
	// idempotent: later calls return what the first returned.
	Close() error
}

// Snapshot is a stored snapshot: the state of an actor after events
// [0, Index). The zero value is an empty snapshot at index 0.
type Snapshot struct {
	Index uint64
	Data  []byte
}
