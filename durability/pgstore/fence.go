package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
)

// ErrFenced is the cause of the *durability.StoreError a write through a
// [Claim] fails with once a newer claim of the same key was taken: the
// writer is a stale incarnation and must stop. It is not retryable.
var ErrFenced = errors.New("fenced: a newer claim holds this key")

// fencedCode is the SQLSTATE the check_fences function raises.
const fencedCode = "PWF01"

func isFenced(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == fencedCode
}

// fencedOr returns err, or ErrFenced with the server's explanation when
// err is the fence check's refusal.
func fencedOr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == fencedCode {
		return fmt.Errorf("%s: %w", pe.Message, ErrFenced)
	}
	return err
}

// Claim takes key over for the caller: it raises key's epoch (a fencing
// token kept in the database) and returns a view of the store whose writes
// commit only while that epoch is still key's newest. Once another member
// claims the same key, every write through this claim fails with
// [ErrFenced], atomically: a write either committed before the newer claim
// was taken, or does not commit at all. Reads are not fenced.
//
// A cluster member claims a session's key when it activates the session;
// the key is any byte string (a session id, say) and need not be one of the
// actor names written through the claim. Keys follow the rule of actor
// names: a key that is empty or longer than [MaxNameLen] bytes is refused
// with durability.ErrInvalidName.
//
// A claim whose connection was lost, or whose ctx was done, after it was
// sent fails with [ErrOutcomeUnknown]: the epoch may have been raised.
// Until its transaction has ended on the server, [Store.Epoch] and
// Claim of the key wait for it (see Timeouts and unknown outcomes in the
// package doc): a claim taken meanwhile would be superseded when that one
// commits after it. One whose ctx was done before it was sent fails with
// ctx's error. Claiming again is safe (it raises the epoch once more).
// A claim the server refuses because the fences table changed under the
// store (a column's type altered) raised nothing: it runs once more, on a
// fresh connection.
func (s *Store) Claim(ctx context.Context, key string) (*Claim, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := s.settled(ctx, doubtKey{claim: true, name: key}); err != nil {
		return nil, &durability.StoreError{Op: OpClaim, Name: key, Err: err}
	}
	ctx, done, err := s.beginRead(ctx)
	if err != nil {
		return nil, &durability.StoreError{Op: OpClaim, Name: key, Err: err}
	}
	defer done()
	epoch, err := s.claimOnce(ctx, key)
	if staleStatement(err) && ctx.Err() == nil {
		// The server refused the claim's statement, prepared before the
		// fences table changed (see staleStatement): it did nothing, the
		// epoch was not raised, and the pool was emptied (see
		// noteFailure). Run on a fresh connection, which prepares it
		// anew, the claim raises the epoch once, as a first run that
		// succeeded would have. Once only: a second refusal is not
		// this one.
		s.log.Info("pgstore: running a claim again on a fresh connection: its statement was prepared before the table changed", "schema", s.schema, "err", err)
		epoch, err = s.claimOnce(ctx, key)
	}
	if err != nil {
		return nil, &durability.StoreError{Op: OpClaim, Name: key, Err: s.explain(err)}
	}
	return &Claim{s: s, f: fence{key: []byte(key), epoch: epoch}}, nil
}

// claimOnce runs key's claim once, on a connection of its own that it
// returns to the pool before it returns (so that a run again may take a
// fresh one), and returns the key's new epoch. A claim whose outcome is
// unknown is put in doubt (see Claim) and its error wraps
// ErrOutcomeUnknown.
func (s *Store) claimOnce(ctx context.Context, key string) (int64, error) {
	conn, err := s.acquire(ctx)
	if err != nil { // nothing sent: the epoch was not raised
		return 0, err
	}
	defer conn.Release()
	// One implicit transaction, whose id comes first (see doubt.go).
	r := runOn(conn.Conn().PgConn())
	var b pgx.Batch
	b.Queue(s.q.txid)
	b.Queue(s.q.claim, []byte(key))
	var epoch int64
	r.xid, err = runPipelined(ctx, conn.Conn(), &b, &epoch)
	if err != nil {
		s.noteFailure(err)
		if unknownOutcome(err) { // not run again: each run raises the epoch
			s.inDoubt(r, doubtKey{claim: true, name: key})
			err = fmt.Errorf("%w (the epoch may have been raised): %w", ErrOutcomeUnknown, err)
		}
		return 0, err
	}
	return epoch, nil
}

// OpClaim is the operation named in the errors of [Store.Claim] and
// [Store.Epoch].
const OpClaim = "claim"

// checkKey returns the error for a claim key that is not a valid actor
// name (empty, or longer than MaxNameLen), or nil.
func checkKey(key string) error {
	if validName(key) {
		return nil
	}
	// Not quoted: it may be very long.
	return &durability.StoreError{Op: OpClaim,
		Err: fmt.Errorf("claim key of %d bytes (want 1 to %d): %w", len(key), MaxNameLen, durability.ErrInvalidName)}
}

// Epoch returns key's current epoch in the database, 0 if it was never
// claimed. A key that Claim would refuse (empty, or longer than
// [MaxNameLen] bytes) is refused alike, with durability.ErrInvalidName.
// While a claim of the key through this store is in doubt (it failed
// with ErrOutcomeUnknown), Epoch waits until its transaction has ended.
func (s *Store) Epoch(ctx context.Context, key string) (uint64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	if err := s.settled(ctx, doubtKey{claim: true, name: key}); err != nil {
		return 0, &durability.StoreError{Op: OpClaim, Name: key, Err: err}
	}
	ctx, done, err := s.beginRead(ctx)
	if err != nil {
		return 0, &durability.StoreError{Op: OpClaim, Name: key, Err: err}
	}
	defer done()
	var epoch int64
	err = s.read(ctx, func() error {
		conn, err := s.acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return conn.QueryRow(ctx, s.q.epoch, []byte(key)).Scan(&epoch)
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, &durability.StoreError{Op: OpClaim, Name: key, Err: s.explain(err)}
	}
	return uint64(epoch), nil
}

// Claim is a fenced view of a [Store], made by [Store.Claim]. It is a
// [durability.Store]: hand it to the durable stages of the session it
// claims. Its Close ends the view only (the Store stays open); closing the
// Store ends every claim. Safe for concurrent use.
type Claim struct {
	s      *Store
	f      fence
	closed atomic.Bool
}

// Key returns the claimed key.
func (c *Claim) Key() string { return string(c.f.key) }

// Epoch returns the claim's epoch: 1 for the key's first claim, one more
// for each later one.
func (c *Claim) Epoch() uint64 { return uint64(c.f.epoch) }

func (c *Claim) submit(ctx context.Context, op string, kind writeKind, name string, index uint64, one []byte, many [][]byte) error {
	if c.closed.Load() {
		return &durability.StoreError{Op: op, Name: name, Err: durability.ErrClosed}
	}
	return c.s.submit(ctx, &c.f, op, kind, name, index, one, many)
}

// PersistEvent implements [durability.Store], fenced.
func (c *Claim) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	return c.submit(ctx, durability.OpPersistEvent, putEvents, name, index, data, nil)
}

// PersistEvents implements [durability.Store], fenced.
func (c *Claim) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	return c.submit(ctx, durability.OpPersistEvents, putEvents, name, first, nil, data)
}

// PersistSnapshot implements [durability.Store], fenced.
func (c *Claim) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	return c.submit(ctx, durability.OpPersistSnapshot, putSnapshot, name, index, data, nil)
}

// DeleteEvents implements [durability.Store], fenced.
func (c *Claim) DeleteEvents(ctx context.Context, name string, through uint64) error {
	return c.submit(ctx, durability.OpDeleteEvents, deleteEvents, name, through, nil, nil)
}

// DeleteSnapshots implements [durability.Store], fenced.
func (c *Claim) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	return c.submit(ctx, durability.OpDeleteSnapshots, deleteSnapshots, name, through, nil, nil)
}

// GetEvents implements [durability.Store].
func (c *Claim) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	if c.closed.Load() {
		return &durability.StoreError{Op: durability.OpGetEvents, Name: name, Err: durability.ErrClosed}
	}
	return c.s.GetEvents(ctx, name, from, to, fn)
}

// GetSnapshot implements [durability.Store].
func (c *Claim) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	if c.closed.Load() {
		return durability.Snapshot{}, false, &durability.StoreError{Op: durability.OpGetSnapshot, Name: name, Err: durability.ErrClosed}
	}
	return c.s.GetSnapshot(ctx, name)
}

// Close ends the view: later calls through it fail with
// [durability.ErrClosed]. Writes already handed over finish. It does not
// release the claim (a newer claim supersedes it whether or not it was
// closed) and does not close the Store.
func (c *Claim) Close() error {
	c.closed.Store(true)
	return nil
}

var (
	_ durability.Store = (*Store)(nil)
	_ durability.Store = (*Claim)(nil)
)
