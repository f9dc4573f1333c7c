package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// ErrOutcomeUnknown is [durability.ErrOutcomeUnknown]: the cause (with the
// failure's own) of the error a write (or [Store.Claim], or
// [Store.Salvage]) returns when it cannot tell whether it committed: its
// transaction was sent, and then the connection was lost, the caller's
// context was done or Close gave up before the server answered (and
// running it again was not safe, or failed). It may have committed or
// not; a read through the same Store tells which, as it waits until the
// write can no longer commit; across processes, only a new Claim settles
// it (see Timeouts and unknown outcomes in the package doc). Every other
// error of a write means that it did not commit.
var ErrOutcomeUnknown = durability.ErrOutcomeUnknown

// writeKind says what a write does.
type writeKind uint8

const (
	putEvents writeKind = iota
	putSnapshot
	deleteEvents
	deleteSnapshots
)

func (k writeKind) op() string {
	switch k {
	case putEvents:
		return durability.OpPersistEvent
	case putSnapshot:
		return durability.OpPersistSnapshot
	case deleteEvents:
		return durability.OpDeleteEvents
	default:
		return durability.OpDeleteSnapshots
	}
}

// fence is a claim's key and epoch that a write must still hold to commit.
type fence struct {
	key   []byte
	epoch int64
}

// write is one mutation waiting for a committer; done receives its outcome
// exactly once. Until a committer takes it, the data slices are the
// caller's; the committer copies them when it takes the write (see
// committer.take), so that a caller that gives up (see Store.giveUp) may
// return while its write is in flight and keep its slices.
type write struct {
	kind  writeKind
	name  string
	index uint64   // first event's index, snapshot index, or "through"
	data  [][]byte // events (one per index from index on), or the snapshot
	one   [1][]byte
	fence *fence
	done  chan error

	// verdict is the write's own outcome when its batch's is not (set by
	// the committer: see Store.rerun); result is the outcome the
	// committer reports (see Store.report).
	verdict, result error

	// mu guards state, flight, ended and doubted, shared by the caller
	// (which may give up) and the committer (which takes the write, sends
	// it and reports its outcome).
	mu      sync.Mutex
	state   writeState
	flight  *flight // the batch that took the write
	ended   bool    // its outcome was reported, in done
	doubted bool    // its caller gave up after it was sent: its actor is in doubt
}

// writeState is where a write is between its caller and the server.
type writeState uint8

const (
	queued writeState = iota // in the queue: the caller may withdraw it
	taken                    // in a committer's batch, not yet sent
	sent                     // its transaction may have reached the server
	gone                     // its caller gave up: it is sent no more
)

// reset clears w for the pool.
func (w *write) reset() {
	w.kind, w.name, w.index, w.data, w.one, w.fence, w.verdict, w.result = 0, "", 0, nil, [1][]byte{}, nil, nil, nil
	w.state, w.flight, w.ended, w.doubted = queued, nil, false, false
}

// flight is what a committer's batch shares: the context its statements
// run under, cancelled once every caller of the batch has given up (or
// Close gave up waiting), and the count of callers still waiting.
type flight struct {
	ctx    context.Context
	cancel context.CancelFunc
	live   atomic.Int64 // callers waiting, and one for the committer while it gathers
}

func (s *Store) newFlight() *flight {
	f := new(flight)
	f.ctx, f.cancel = context.WithCancel(s.life)
	f.live.Store(1)
	return f
}

// leave counts one caller (or the gathering committer) out; the last one
// out cancels the batch's statements: nobody waits for them.
func (f *flight) leave() {
	if f.live.Add(-1) == 0 {
		f.cancel()
	}
}

// newWrite is the New of a store's pool of writes ([Store].writePool),
// the store's own rather than the package's: a store opened inside a
// testing/synctest bubble makes its channels there, and a receive on one
// from outside the bubble is a fatal error of the whole process.
func newWrite() any { return &write{done: make(chan error, 1)} }

// PersistEvent implements [durability.Store]. It returns once the
// transaction holding the event has committed.
func (s *Store) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	return s.submit(ctx, nil, durability.OpPersistEvent, putEvents, name, index, data, nil)
}

// PersistEvents implements [durability.Store]: the batch's events commit in
// one transaction (with whatever other writes share it).
func (s *Store) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	return s.submit(ctx, nil, durability.OpPersistEvents, putEvents, name, first, nil, data)
}

// PersistSnapshot implements [durability.Store]. The snapshot and the
// compaction it implies commit in one transaction.
func (s *Store) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	return s.submit(ctx, nil, durability.OpPersistSnapshot, putSnapshot, name, index, data, nil)
}

// DeleteEvents implements [durability.Store].
func (s *Store) DeleteEvents(ctx context.Context, name string, through uint64) error {
	return s.submit(ctx, nil, durability.OpDeleteEvents, deleteEvents, name, through, nil, nil)
}

// DeleteSnapshots implements [durability.Store].
func (s *Store) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	return s.submit(ctx, nil, durability.OpDeleteSnapshots, deleteSnapshots, name, through, nil, nil)
}

// submit hands a write to the committers and waits for its outcome. A
// single value comes as one, a batch of events as many (op is then
// OpPersistEvents).
func (s *Store) submit(ctx context.Context, f *fence, op string, kind writeKind, name string, index uint64, one []byte, many [][]byte) error {
	if !validName(name) {
		return &durability.StoreError{Op: op, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	if op == durability.OpPersistEvents {
		if len(many) == 0 { // nothing to store, after the usual checks
			if err := s.check(ctx); err != nil {
				return &durability.StoreError{Op: op, Name: name, Err: err}
			}
			return nil
		}
		if index+uint64(len(many)-1) < index {
			return &durability.StoreError{Op: op, Name: name,
				Err: fmt.Errorf("%d events from index %d: %w", len(many), index, durability.ErrIndexOverflow)}
		}
	}
	if err := s.settled(ctx, doubtKey{name: name}); err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	w := s.writePool.Get().(*write)
	w.kind, w.name, w.index, w.fence = kind, name, index, f
	switch {
	case op == durability.OpPersistEvents:
		w.data = many
	case kind == putEvents || kind == putSnapshot:
		w.one[0] = one
		w.data = w.one[:]
	}
	s.inside.Add(1)
	err := s.enqueue(ctx, w)
	kept := true // w goes back to the pool
	if err == nil {
		select {
		case err = <-w.done:
		case <-ctx.Done():
			err = s.giveUp(ctx, w)
			kept = false // a committer may hold it still
		}
	}
	s.inside.Add(-1)
	select { // a committer may be waiting for this writer
	case s.wake <- struct{}{}:
	default:
	}
	if kept {
		w.reset()
		s.writePool.Put(w)
	}
	if err != nil {
		return storeErr(op, name, err)
	}
	return nil
}

// giveUp ends the wait for w, whose caller's ctx is done, and returns the
// write's error: ctx's error when w was not sent (it never will be; with
// what to do when the pool's connections were all in use, see explain), its
// outcome when it came meanwhile, or else ErrOutcomeUnknown with ctx's
// error (its transaction runs on for the other writes that share it, or
// is cancelled when none is left). In that last case the actor is in
// doubt (see doubt.go) until the transaction has ended.
func (s *Store) giveUp(ctx context.Context, w *write) error {
	w.mu.Lock()
	state, f, ended := w.state, w.flight, w.ended
	w.state = gone
	if state == sent && !ended {
		w.doubted = true
		s.addDoubt(doubtKey{name: w.name})
	}
	w.mu.Unlock()
	if f != nil {
		f.leave()
	}
	switch {
	case state != sent:
		return s.explain(s.poolFullOr(ctx.Err()))
	case ended:
		return <-w.done
	}
	return fmt.Errorf("%w (the caller's context ended the wait for the server's answer): %w", ErrOutcomeUnknown, ctx.Err())
}

// check returns ErrClosed after Close, or ctx's error when it is done.
func (s *Store) check(ctx context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return durability.ErrClosed
	}
	return ctx.Err()
}

// enqueue sends w to the committers unless the store is closed or ctx is
// done first.
func (s *Store) enqueue(ctx context.Context, w *write) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return durability.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.writes <- w:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitLoop is one committer: it takes the first waiting write, waits
// until every other writer inside a write call has queued its write, is
// in another committer's batch, or has returned (writers just answered
// are inside until they return, and by then many have come back with
// their next write), adds every write already queued (up to the batch
// size), commits them in one transaction and reports to each. One
// committer gathers at a time, while the others' transactions are in
// flight, so 64 writers and two committers settle into two batches of
// about 32 that overlap, rather than a large batch followed by small ones
// started by the first writer to come back (about 20 writes a
// transaction, measured). The wait is never for a writer that is not
// inside a write call, so a lone writer commits at once.
func (s *Store) commitLoop() {
	batch := make([]*write, 0, s.maxBatch)
	var c committer
	for {
		f := s.newFlight()
		batch = s.gather(&c, f, batch[:0])
		f.leave() // the batch is whole: its callers alone keep it going
		if len(batch) == 0 {
			f.cancel()
			return
		}
		s.commit(&c, f, batch)
		f.cancel()
		s.taken.Add(-int64(len(batch)))
		clear(batch)
		c.release()
	}
}

// gather returns the next batch, appended to batch, and counts it as
// taken; an empty batch once the store is closed and its writes drained.
// Writes withdrawn by their callers (see Store.giveUp) are left out.
func (s *Store) gather(c *committer, f *flight, batch []*write) []*write {
	s.gatherMu.Lock()
	defer s.gatherMu.Unlock()
	for len(batch) == 0 {
		first, ok := <-s.writes
		if !ok {
			return batch
		}
		if c.take(first, f) {
			batch = append(batch, first)
		}
	}
	open := true
wait:
	for len(batch) < s.maxBatch && int64(len(batch))+s.taken.Load() < s.inside.Load() {
		select {
		case w, ok := <-s.writes:
			if !ok {
				open = false
				break wait
			}
			if c.take(w, f) {
				batch = append(batch, w)
			}
		case <-s.wake:
		}
	}
drain:
	for open && len(batch) < s.maxBatch {
		select {
		case w, ok := <-s.writes:
			if !ok {
				break drain
			}
			if c.take(w, f) {
				batch = append(batch, w)
			}
		default:
			break drain
		}
	}
	s.taken.Add(int64(len(batch)))
	return batch
}

// commit runs batch as one transaction, under f's context (see flight),
// and reports to each write. If that fails because of what one write
// asked (a claim superseded, a value PostgreSQL refuses), each write is
// retried in a transaction of its own, so that it fails alone. A failure
// of the connection or of the server as a whole (see serverFailure) fails
// the whole batch at once: each write would fail the same way alone. A
// transaction whose connection was lost runs once more where that is safe
// (see Store.try).
//
// Its writes are sent (see committer.send) once it has a connection: a
// caller that gives up while the batch waits for one learns that its
// write was never sent (see Store.giveUp).
func (s *Store) commit(c *committer, f *flight, batch []*write) {
	defer s.report(c, batch)
	ctx := f.ctx
	conn, err := s.acquire(ctx)
	if err != nil {
		err = s.failure(ctx, unsent{err})
		for _, w := range batch {
			w.result = err
		}
		return
	}
	c.conn = conn // for the first run (see committer.run)
	defer c.dropConn()
	live := c.send(batch)
	err, final := s.try(ctx, c, live)
	if err == nil {
		for _, w := range batch {
			w.result = w.verdict
		}
		return
	}
	if final || len(live) == 1 || !retryAlone(err) {
		if len(live) > 1 || !isFenced(err) {
			s.log.Warn("pgstore commit failed", "writes", len(live), "err", err)
		}
		err = s.failure(ctx, err)
		for _, w := range batch {
			w.result = err
		}
		return
	}
	for _, w := range batch {
		if !c.still(w) {
			w.result = context.Canceled // nobody waits for it: not sent again
			continue
		}
		err, _ := s.try(ctx, c, []*write{w})
		if err != nil && !isFenced(err) {
			s.log.Warn("pgstore commit failed", "name", quote.Name(w.name, "actor name"), "op", w.kind.op(), "err", err)
		}
		if err == nil {
			err = w.verdict
		}
		w.result = s.failure(ctx, err)
	}
}

// report hands each write of batch its result. A write whose transaction
// may still run on the server (a run's connection was closed or lost
// before the server reported its end: see committer.unsettled) and whose
// outcome is unknown leaves its actor in doubt (see doubt.go) until the
// transactions of those runs have ended; a write whose caller gave up
// after it was sent ends its actor's doubt now, when every run's end was
// reported.
func (s *Store) report(c *committer, batch []*write) {
	var doubted []doubtKey
	for _, w := range batch {
		w.mu.Lock()
		w.ended = true
		switch {
		case w.doubted:
			doubted = append(doubted, doubtKey{name: w.name})
		case len(c.unsettled) > 0 && w.state == sent && errors.Is(w.result, ErrOutcomeUnknown):
			s.addDoubt(doubtKey{name: w.name}) // before its caller hears of it
			doubted = append(doubted, doubtKey{name: w.name})
		}
		w.done <- w.result
		w.mu.Unlock()
	}
	switch {
	case len(doubted) == 0:
	case len(c.unsettled) == 0:
		s.endDoubt(doubted...)
	default:
		s.settle(slices.Clone(c.unsettled), doubted)
	}
}

// try runs writes (sent, see committer.send) in one transaction and counts
// it. When the transaction's connection was lost, with ctx not done, it
// runs once more on a fresh connection (the pool was reset: see
// noteFailure) where that is safe, leaving out the writes whose callers
// gave up meanwhile:
//   - as it is, when nothing of it reached the server (pgconn.SafeToRetry,
//     or unsent);
//   - else once the first run's transaction has ended on the server (it
//     may go on after its connection was lost, and would overwrite what
//     is written after it: see Store.awaitEnd); as it is when it did not
//     commit; else (it committed, or the server cannot tell: it did not
//     report the transaction's id before the connection went) with every
//     row it puts checked against the row stored (see Store.rerun): the
//     writes whose rows hold other bytes are not run again and fail with
//     ErrOutcomeUnknown, each in its verdict. A committed id is checked
//     so too, not trusted: a server that crashed assigns again the ids
//     that nothing durable named, so the transaction that committed under
//     the id may be another one, run after the crash, while the first run
//     was lost with it.
//
// It returns the error of the last run; final says that the error must
// be reported as it is to every write, not retried write by write: the
// first run's outcome is unknown.
func (s *Store) try(ctx context.Context, c *committer, writes []*write) (err error, final bool) {
	if len(writes) == 0 {
		return nil, false
	}
	first, err := s.runCounted(ctx, c, writes)
	if err == nil || ctx.Err() != nil || !connectionLost(err) {
		return err, false
	}
	if writes = c.stillAll(writes); len(writes) == 0 {
		return err, false // nobody waits for them: not sent again
	}
	if pgconn.SafeToRetry(err) || errors.As(err, new(unsent)) {
		s.log.Info("pgstore: running a transaction again on a fresh connection: it never reached the server", "writes", len(writes), "err", err)
		_, err = s.runCounted(ctx, c, writes)
		return err, false
	}
	st, werr := s.awaitEnd(ctx, first)
	if werr != nil {
		return rerunFailed(err, werr), true // the first run stays unsettled: its writes in doubt
	}
	c.settled(first)
	if st == aborted {
		s.log.Info("pgstore: running a transaction again on a fresh connection: it did not commit", "writes", len(writes), "err", err)
		_, err = s.runCounted(ctx, c, writes)
		return err, false
	}
	s.log.Info("pgstore: running a transaction again on a fresh connection, checking what it stores against what the rows hold", "writes", len(writes), "err", err)
	if rerr := s.rerun(ctx, c, writes, err); rerr != nil {
		return rerunFailed(err, rerr), true
	}
	return nil, false
}

// rerunFailed is the error of writes whose transaction's connection was
// lost (lost) and whose run again failed with err.
func rerunFailed(lost, err error) error {
	return fmt.Errorf("%w: the connection was lost (%v), and running it again failed: %w", ErrOutcomeUnknown, lost, err)
}

// runCounted runs writes in one transaction, notes its failure (see
// noteFailure) and counts its success. It returns the run, to wait for
// (see committer.settle).
func (s *Store) runCounted(ctx context.Context, c *committer, writes []*write) (run, error) {
	r, err := c.run(ctx, s, writes)
	c.settle(r, err)
	s.noteFailure(err)
	if err == nil {
		s.commits.Add(1)
		s.written.Add(int64(len(writes)))
	}
	return r, err
}

// rerun runs writes again after their transaction's connection was lost
// (with lost, that error) once it had sent something, so that it may have
// committed: in an explicit transaction that puts each row only where none
// is stored (locking the rows that are), then compares the bytes each row
// holds with the bytes to put. Each write with a row that holds other
// bytes is left out, with a verdict of ErrOutcomeUnknown (the first run
// may or may not have replaced them, and running it again would overwrite
// them), and the transaction, rolled back, runs again without them. When
// every row matches, the compactions and deletes run again too (they are
// idempotent) and the transaction commits. When the server refuses what
// one write asks (see retryAlone), each write runs again alone, and one
// that fails has its error, with ErrOutcomeUnknown, as its verdict.
func (s *Store) rerun(ctx context.Context, c *committer, writes []*write, lost error) error {
	for {
		var err error
		writes = slices.DeleteFunc(writes, func(w *write) bool { return w.verdict != nil || !c.still(w) })
		if len(writes) == 0 {
			return nil
		}
		var other []rowRef
		err = s.withConn(ctx, func(conn *pgxpool.Conn) error {
			r := runOn(conn.Conn().PgConn())
			var committing bool
			other, committing, err = c.runChecked(ctx, s, conn, writes, &r)
			if committing { // else it cannot commit: its COMMIT was never sent
				c.settle(r, err)
			}
			return err
		})
		s.noteFailure(err)
		if err != nil && len(writes) > 1 && retryAlone(err) {
			// The server refused what one write asked (a claim
			// superseded, say): as on a first run (see Store.commit),
			// each write runs again alone, so that it fails alone.
			for _, w := range writes {
				if !c.still(w) {
					continue
				}
				if werr := s.rerun(ctx, c, []*write{w}, lost); werr != nil {
					w.verdict = s.failure(ctx, rerunFailed(lost, werr))
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
		if len(other) == 0 {
			s.commits.Add(1)
			s.written.Add(int64(len(writes)))
			return nil
		}
		left := false // a write left out: the loop makes progress
		for _, r := range other {
			for _, w := range writes {
				if w.verdict == nil && r.in(w) {
					w.verdict = fmt.Errorf("%w: the connection was lost (%v) and the %s at index %d holds other bytes than the write's, which running it again would overwrite", ErrOutcomeUnknown, lost, r.kind, r.index)
					left = true
				}
			}
		}
		if !left { // rows of no write: cannot be, but never loop for it
			return fmt.Errorf("rows %v hold other bytes, and no write puts them", other)
		}
	}
}

// withConn runs fn on a connection of the pool.
func (s *Store) withConn(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return fn(conn)
}

// rowRef names a stored row.
type rowRef struct {
	kind  durability.RecordKind
	name  string
	index uint64
}

// in reports whether write w puts the row r.
func (r rowRef) in(w *write) bool {
	if w.name != r.name {
		return false
	}
	switch w.kind {
	case putEvents:
		return r.kind == durability.RecordEvent && r.index >= w.index && r.index-w.index < uint64(len(w.data))
	case putSnapshot:
		return r.kind == durability.RecordSnapshot && r.index == w.index
	}
	return false
}

// failure is the error reported for a transaction that failed with err
// under ctx: the fence check's refusal as ErrFenced, and a failure after
// the transaction was sent, which leaves its outcome unknown, with
// ErrOutcomeUnknown (and the reason ctx was cancelled, when it was
// Close's), and a failure of the server or of the store as a whole with
// what to do about it (see explain).
func (s *Store) failure(ctx context.Context, err error) error {
	return s.explain(s.classify(ctx, err))
}

// classify is failure, but for the explanation (see explain).
func (s *Store) classify(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrOutcomeUnknown): // from Store.try
		if isFenced(err) {
			return fmt.Errorf("%w (%w)", err, ErrFenced)
		}
		return err
	case errors.As(err, new(unsent)) && errors.Is(context.Cause(ctx), errCloseGaveUp):
		return fmt.Errorf("%w: %w (the write was never sent): %w", durability.ErrClosed, errCloseGaveUp, err)
	case !unknownOutcome(err):
		return fencedOr(err)
	}
	if errors.Is(context.Cause(ctx), errCloseGaveUp) {
		return fmt.Errorf("%w: %w: %w", ErrOutcomeUnknown, errCloseGaveUp, err)
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

// unknownOutcome reports whether a transaction that failed with err may
// have committed: it was sent (not pgconn.SafeToRetry, nor a failure to
// connect) and the server did not refuse it (a PgError, but for a lost
// connection's: see lostCode).
func unknownOutcome(err error) bool {
	if err == nil || pgconn.SafeToRetry(err) || errors.As(err, new(unsent)) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return lostCode(pe.Code)
	}
	return true
}

// readOnlySQLTransaction is the SQLSTATE of a write refused by a server
// that takes no writes: a standby, or a primary demoted to one.
const readOnlySQLTransaction = "25006"

// noteFailure drops every connection of the pool when err says that the
// next calls would fail on them too, so that they connect anew:
//   - the server takes no writes (25006): during a failover, new
//     connections (through a proxy, or a name or a multi-host connection
//     string with target_session_attrs=read-write) reach the new primary,
//     while the old ones would stay on the demoted server until they aged
//     out;
//   - the connection was lost (see connectionLost): a restart, a crash
//     or an operator ending sessions kills every connection at once, and
//     each dead one left in the pool would fail one more call;
//   - a table changed under the store (see staleStatement): each
//     connection holds statements prepared for the table as it was,
//     which the server refuses to run once each.
//
// Connections in use are dropped when they are returned. Other errors,
// and nil, change nothing. It is called once per failed transaction,
// claim or read (see Store.read): a batch that fails so is not retried
// write by write (see serverFailure), so it resets the pool once.
func (s *Store) noteFailure(err error) {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return
	case errors.As(err, &pe) && pe.Code == readOnlySQLTransaction:
		s.log.Warn("pgstore: the server takes no writes (a standby, or a demoted primary); dropping its connections, the next calls connect anew", "err", err)
	case connectionLost(err):
		s.log.Warn("pgstore: the connection to the server was lost (a restart, a crash, or sessions ended); dropping every connection, the next calls connect anew", "err", err)
	case staleStatement(err):
		s.log.Warn("pgstore: a table of the store changed under it (a migration or an operator altered a column's type); dropping every connection, whose statements were prepared for the table as it was", "schema", s.schema, "err", err)
	default:
		return
	}
	s.pool.Reset()
}

// staleStatement reports whether err is the server's refusal to run a
// statement prepared before a table it reads changed (a column's type
// altered, or the table dropped and created anew with other types):
// SQLSTATE 0A000, "cached plan must not change result type". The
// statement did nothing; prepared anew, on a fresh connection, it runs.
func staleStatement(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "0A000" && strings.Contains(pe.Message, "cached plan must not change result type")
}

// connectionLost reports whether err says that the connection it came
// from is gone, and likely its siblings with it: SQLSTATE class 08
// (connection exception) or class 57 (operator intervention: a shutdown,
// a crash, sessions ended) except 57014 query_canceled; or, with no
// SQLSTATE, a network error, an end of stream, or a connection pgconn has
// closed. A timeout of the caller's context is none of these: pgconn
// closes that one connection, the others are sound.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return lostCode(pe.Code)
	}
	if pgconn.Timeout(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// retryAlone reports whether err came from the server refusing a statement
// of the batch (so other writes of the batch may succeed on their own),
// rather than from the connection or from the server's state.
func retryAlone(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && !serverFailure(pe.Code)
}

// serverFailure reports whether the SQLSTATE code says that the server
// (or the connection to it) refused or lost the transaction whatever it
// held, so that every write of the batch would fail the same way alone:
//   - 25006 read_only_sql_transaction: a standby, or a demoted primary;
//   - class 08, connection exception;
//   - class 57, operator intervention (admin_shutdown, crash_shutdown,
//     cannot_connect_now, database_dropped, idle_session_timeout), except
//     57014 query_canceled, which a statement_timeout raises and a smaller
//     transaction may escape;
//   - 53100 disk_full.
//
// Other errors (constraint and data errors, a superseded claim, a
// serialization failure, out of memory, a statement timeout) may depend on
// what the batch held, so the batch's writes are retried alone.
func serverFailure(code string) bool {
	return code == readOnlySQLTransaction || code == "53100" || lostCode(code)
}

// lostCode reports whether the SQLSTATE code is of class 08 (connection
// exception) or 57 (operator intervention), except 57014 query_canceled.
func lostCode(code string) bool {
	return code != "57014" && len(code) == 5 && (code[:2] == "08" || code[:2] == "57")
}

// take puts w in the batch of flight f unless its caller withdrew it,
// copying its data (see write), and reports whether it did.
func (c *committer) take(w *write, f *flight) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != queued {
		return false
	}
	w.state, w.flight = taken, f
	f.live.Add(1)
	if w.data != nil {
		first := len(c.slices)
		for _, d := range w.data {
			at := len(c.bytes)
			c.bytes = append(c.bytes, d...)
			c.slices = append(c.slices, c.bytes[at:len(c.bytes):len(c.bytes)])
		}
		w.data = c.slices[first:len(c.slices):len(c.slices)]
	}
	return true
}

// send marks the writes of batch whose callers still wait as sent and
// returns them (in a buffer of c's).
func (c *committer) send(batch []*write) []*write {
	c.live = c.live[:0]
	for _, w := range batch {
		w.mu.Lock()
		if w.state == taken {
			w.state = sent
			c.live = append(c.live, w)
		}
		w.mu.Unlock()
	}
	return c.live
}

// still reports whether w's caller still waits for it.
func (c *committer) still(w *write) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == sent
}

// stillAll returns the writes whose callers still wait, in place.
func (c *committer) stillAll(writes []*write) []*write {
	return slices.DeleteFunc(writes, func(w *write) bool { return !c.still(w) })
}

// arenaKeep is the most bytes of copied data a committer keeps for its
// next batch; it drops a larger buffer.
const arenaKeep = 16 << 20

// release forgets the batch's copied data.
func (c *committer) release() {
	clear(c.slices)
	clear(c.live)
	c.slices, c.live, c.unsettled = c.slices[:0], c.live[:0], c.unsettled[:0]
	if cap(c.bytes) > arenaKeep {
		c.bytes = nil
	}
	c.bytes = c.bytes[:0]
}

// committer holds one committer's reusable argument buffers.
type committer struct {
	conn   *pgxpool.Conn // taken by commit for its first run, or nil
	bytes  []byte        // the data of the writes taken, copied
	slices [][]byte      // the writes' data, in bytes
	live   []*write

	// unsettled holds the batch's runs whose transactions may not have
	// ended (see committer.settle).
	unsettled []run

	ev, snap    rows
	compact     keys
	delEv       keys
	delSnap     keys
	fenceKeys   [][]byte
	fenceEpochs []int64
	seen        map[rowKey]int // events added, by key
	seenSnap    map[rowKey]int // snapshots added, by key
}

type rows struct {
	names [][]byte
	idx   []int64
	data  [][]byte
	crc   []int32
}

func (r *rows) reset() {
	clear(r.names)
	clear(r.data)
	r.names, r.idx, r.data, r.crc = r.names[:0], r.idx[:0], r.data[:0], r.crc[:0]
}

func (r *rows) Len() int { return len(r.idx) }
func (r *rows) Less(i, j int) bool {
	if c := bytes.Compare(r.names[i], r.names[j]); c != 0 {
		return c < 0
	}
	return r.idx[i] < r.idx[j]
}
func (r *rows) Swap(i, j int) {
	r.names[i], r.names[j] = r.names[j], r.names[i]
	r.idx[i], r.idx[j] = r.idx[j], r.idx[i]
	r.data[i], r.data[j] = r.data[j], r.data[i]
	r.crc[i], r.crc[j] = r.crc[j], r.crc[i]
}

type keys struct {
	names [][]byte
	idx   []int64
}

func (k *keys) reset() {
	clear(k.names)
	k.names, k.idx = k.names[:0], k.idx[:0]
}

type rowKey struct {
	name string
	idx  int64
}

// add appends a row, or replaces the data of a row with the same key added
// earlier in the batch (the writes of one batch are concurrent, so any order
// between them is a valid one, and one statement cannot touch a row twice).
func (r *rows) add(seen map[rowKey]int, kind durability.RecordKind, name string, idx uint64, data []byte) {
	k := rowKey{name, bias(idx)}
	if data == nil {
		data = []byte{} // NULL is not a value
	}
	sum := checksum(kind, name, idx, data)
	if i, ok := seen[k]; ok {
		r.data[i], r.crc[i] = data, sum
		return
	}
	seen[k] = len(r.idx)
	r.names = append(r.names, []byte(name))
	r.idx = append(r.idx, k.idx)
	r.data = append(r.data, data)
	r.crc = append(r.crc, sum)
}

// run commits batch in one implicit transaction: one pipelined round trip
// of at most eight statements, whatever the batch's size: the first asks
// for the transaction's id, so that its end can be learned if the
// connection is lost (see doubt.go). Puts come before compactions and
// deletes: a valid order, since the writes are concurrent. It returns the
// run, to wait for (see committer.settle).
func (c *committer) run(ctx context.Context, s *Store, batch []*write) (run, error) {
	c.build(s, batch)
	var b pgx.Batch
	b.Queue(s.q.txid)
	c.queueFences(&b, s)
	c.queuePuts(&b, s.q.putEvents, s.q.putSnapshots)
	c.queueDeletes(&b, s)
	conn := c.conn
	c.conn = nil
	if conn == nil {
		var err error
		if conn, err = s.acquire(ctx); err != nil {
			return run{}, unsent{err}
		}
	}
	defer conn.Release()
	r := runOn(conn.Conn().PgConn())
	var err error
	r.xid, err = runPipelined(ctx, conn.Conn(), &b, nil)
	return r, err
}

// dropConn returns the connection taken for the batch's first run to the
// pool when no run used it (every caller gave up meanwhile).
func (c *committer) dropConn() {
	if c.conn != nil {
		c.conn.Release()
		c.conn = nil
	}
}

// settle notes a run of the batch that failed with err: unless the server
// reported the end of its transaction (or nothing of it was sent), it may
// run still, and the outcome of its writes is in doubt until it has ended
// (see Store.report).
func (c *committer) settle(r run, err error) {
	if !endKnown(err) {
		c.unsettled = append(c.unsettled, r)
	}
}

// settled forgets run r, whose transaction has ended.
func (c *committer) settled(r run) {
	c.unsettled = slices.DeleteFunc(c.unsettled, func(u run) bool { return u == r })
}

// endKnown reports whether a run that failed with err (or succeeded) has
// no transaction left on the server: it committed, the server refused it
// (a PgError but for a lost connection's: see lostCode), or nothing of it
// was sent.
func endKnown(err error) bool { return !unknownOutcome(err) }

// unsent is the error of a transaction that failed before any of it was
// sent (no connection could be had): its outcome is known, nothing of it
// is stored.
type unsent struct{ err error }

func (e unsent) Error() string { return e.err.Error() }
func (e unsent) Unwrap() error { return e.err }

// runChecked runs writes on conn in an explicit transaction (see
// Store.rerun) that puts each row only where none is stored and locks
// the rows that are. It returns the rows that hold other bytes than the
// writes', rolling back, or else runs the compactions and deletes and
// commits. It fills in rn's transaction id, and committing says that its
// COMMIT was sent (before, the transaction cannot commit).
func (c *committer) runChecked(ctx context.Context, s *Store, conn *pgxpool.Conn, writes []*write, rn *run) (_ []rowRef, committing bool, _ error) {
	c.build(s, writes)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback(ctx) // bounded by ctx: once it is done, the connection is closed, which rolls back
	var b pgx.Batch
	b.Queue(s.q.txid)
	c.queueFences(&b, s)
	c.queuePuts(&b, s.q.putEventsIfAbsent, s.q.putSnapshotsIfAbsent)
	res := tx.SendBatch(ctx, &b)
	if err := res.QueryRow().Scan(&rn.xid); err != nil {
		rn.xid = 0
		res.Close()
		return nil, false, err
	}
	if err := res.Close(); err != nil {
		return nil, false, err
	}
	var other []rowRef
	for _, r := range []struct {
		rows *rows
		q    string
		kind durability.RecordKind
	}{{&c.ev, s.q.otherEvents, durability.RecordEvent}, {&c.snap, s.q.otherSnapshots, durability.RecordSnapshot}} {
		if r.rows.Len() == 0 {
			continue
		}
		res, err := tx.Query(ctx, r.q, r.rows.names, r.rows.idx, r.rows.data, r.rows.crc)
		if err != nil {
			return nil, false, err
		}
		var (
			name []byte
			idx  int64
		)
		_, err = pgx.ForEachRow(res, []any{&name, &idx}, func() error {
			other = append(other, rowRef{r.kind, string(name), unbias(idx)})
			return nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	if len(other) > 0 {
		return other, false, nil
	}
	b = pgx.Batch{}
	c.queueDeletes(&b, s)
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return nil, false, err
		}
	}
	return nil, true, tx.Commit(ctx)
}

// build fills c's buffers with the rows, fences, compactions and deletes
// of batch.
func (c *committer) build(s *Store, batch []*write) {
	c.ev.reset()
	c.snap.reset()
	c.compact.reset()
	c.delEv.reset()
	c.delSnap.reset()
	clear(c.fenceKeys)
	c.fenceKeys, c.fenceEpochs = c.fenceKeys[:0], c.fenceEpochs[:0]
	if c.seen == nil {
		c.seen, c.seenSnap = make(map[rowKey]int), make(map[rowKey]int)
	}
	clear(c.seen)
	clear(c.seenSnap)
	for _, w := range batch {
		if w.fence != nil && !c.hasFence(w.fence) {
			c.fenceKeys = append(c.fenceKeys, w.fence.key)
			c.fenceEpochs = append(c.fenceEpochs, w.fence.epoch)
		}
		switch w.kind {
		case putEvents:
			for i, d := range w.data {
				c.ev.add(c.seen, durability.RecordEvent, w.name, w.index+uint64(i), d)
			}
		case putSnapshot:
			c.snap.add(c.seenSnap, durability.RecordSnapshot, w.name, w.index, w.data[0])
			if !s.keepHistory {
				c.compact.names = append(c.compact.names, []byte(w.name))
				c.compact.idx = append(c.compact.idx, bias(w.index))
			}
		case deleteEvents:
			c.delEv.names = append(c.delEv.names, []byte(w.name))
			c.delEv.idx = append(c.delEv.idx, bias(w.index))
		case deleteSnapshots:
			c.delSnap.names = append(c.delSnap.names, []byte(w.name))
			c.delSnap.idx = append(c.delSnap.idx, bias(w.index))
		}
	}
	// One order of rows for every transaction, so that two committers
	// writing the same rows wait for each other instead of deadlocking.
	sort.Sort(&c.ev)
	sort.Sort(&c.snap)
}

func (c *committer) queueFences(b *pgx.Batch, s *Store) {
	if len(c.fenceKeys) > 0 {
		b.Queue(s.q.checkFences, c.fenceKeys, c.fenceEpochs)
	}
}

// queuePuts queues the rows built, with the statements given.
func (c *committer) queuePuts(b *pgx.Batch, events, snapshots string) {
	if c.ev.Len() > 0 {
		b.Queue(events, c.ev.names, c.ev.idx, c.ev.data, c.ev.crc)
	}
	if c.snap.Len() > 0 {
		b.Queue(snapshots, c.snap.names, c.snap.idx, c.snap.data, c.snap.crc)
	}
}

// queueDeletes queues the compactions and deletes built.
func (c *committer) queueDeletes(b *pgx.Batch, s *Store) {
	if len(c.compact.idx) > 0 {
		b.Queue(s.q.compactEvents, c.compact.names, c.compact.idx)
		b.Queue(s.q.compactSnapshots, c.compact.names, c.compact.idx)
	}
	if len(c.delEv.idx) > 0 {
		b.Queue(s.q.deleteEvents, c.delEv.names, c.delEv.idx)
	}
	if len(c.delSnap.idx) > 0 {
		b.Queue(s.q.deleteSnapshots, c.delSnap.names, c.delSnap.idx)
	}
}

// hasFence reports whether f's key and epoch are checked already. Claims of
// one key with different epochs are each checked (and at most one passes).
func (c *committer) hasFence(f *fence) bool {
	for i, k := range c.fenceKeys {
		if c.fenceEpochs[i] == f.epoch && bytes.Equal(k, f.key) {
			return true
		}
	}
	return false
}

// bias maps an index to a bigint with the same order: the top bit flipped.
func bias(i uint64) int64 { return int64(i ^ (1 << 63)) }

// unbias is the inverse of bias.
func unbias(v int64) uint64 { return uint64(v) ^ (1 << 63) }

// maxBiased is bias(math.MaxUint64).
const maxBiased = math.MaxInt64
