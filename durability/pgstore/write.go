package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
)

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
// exactly once. The data slices are the caller's: the caller waits for the
// outcome, so they live until the commit has sent them.
type write struct {
	kind  writeKind
	name  string
	index uint64   // first event's index, snapshot index, or "through"
	data  [][]byte // events (one per index from index on), or the snapshot
	one   [1][]byte
	fence *fence
	done  chan error
}

var writePool = sync.Pool{New: func() any { return &write{done: make(chan error, 1)} }}

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
		return &durability.StoreError{Op: op, Name: name, Err: durability.ErrInvalidName}
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
	w := writePool.Get().(*write)
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
	if err == nil {
		err = <-w.done
	}
	s.inside.Add(-1)
	select { // a committer may be waiting for this writer
	case s.wake <- struct{}{}:
	default:
	}
	*w = write{done: w.done}
	writePool.Put(w)
	if err != nil {
		return storeErr(op, name, err)
	}
	return nil
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
		batch = s.gather(batch[:0])
		if len(batch) == 0 {
			return
		}
		s.commit(&c, batch)
		s.taken.Add(-int64(len(batch)))
		clear(batch)
	}
}

// gather returns the next batch, appended to batch, and counts it as
// taken; an empty batch once the store is closed and its writes drained.
func (s *Store) gather(batch []*write) []*write {
	s.gatherMu.Lock()
	defer s.gatherMu.Unlock()
	first, ok := <-s.writes
	if !ok {
		return batch
	}
	batch = append(batch, first)
	open := true
wait:
	for len(batch) < s.maxBatch && int64(len(batch))+s.taken.Load() < s.inside.Load() {
		select {
		case w, ok := <-s.writes:
			if !ok {
				open = false
				break wait
			}
			batch = append(batch, w)
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
			batch = append(batch, w)
		default:
			break drain
		}
	}
	s.taken.Add(int64(len(batch)))
	return batch
}

// commit runs batch as one transaction. If that fails because of what one
// write asked (a claim superseded, a value PostgreSQL refuses), each write
// is retried in a transaction of its own, so that it fails alone. A
// failure of the connection or of the server as a whole (see
// serverFailure) fails the whole batch at once: each write would fail the
// same way alone.
func (s *Store) commit(c *committer, batch []*write) {
	ctx := context.Background()
	err := c.run(ctx, s, batch)
	s.noteFailure(err)
	if err == nil {
		s.commits.Add(1)
		s.written.Add(int64(len(batch)))
		for _, w := range batch {
			w.done <- nil
		}
		return
	}
	if len(batch) == 1 || !retryAlone(err) {
		if len(batch) > 1 || !isFenced(err) {
			s.log.Warn("pgstore commit failed", "writes", len(batch), "err", err)
		}
		for _, w := range batch {
			w.done <- fencedOr(err)
		}
		return
	}
	for _, w := range batch {
		one := []*write{w}
		err := c.run(ctx, s, one)
		s.noteFailure(err)
		if err == nil {
			s.commits.Add(1)
			s.written.Add(1)
		} else if !isFenced(err) {
			s.log.Warn("pgstore commit failed", "name", w.name, "op", w.kind.op(), "err", err)
		}
		w.done <- fencedOr(err)
	}
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
//     each dead one left in the pool would fail one more call.
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
	default:
		return
	}
	s.pool.Reset()
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

// committer holds one committer's reusable argument buffers.
type committer struct {
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
// of at most seven statements, whatever the batch's size. Puts come before
// compactions and deletes: a valid order, since the writes are concurrent.
func (c *committer) run(ctx context.Context, s *Store, batch []*write) error {
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
	var b pgx.Batch
	if len(c.fenceKeys) > 0 {
		b.Queue(s.q.checkFences, c.fenceKeys, c.fenceEpochs)
	}
	if c.ev.Len() > 0 {
		b.Queue(s.q.putEvents, c.ev.names, c.ev.idx, c.ev.data, c.ev.crc)
	}
	if c.snap.Len() > 0 {
		b.Queue(s.q.putSnapshots, c.snap.names, c.snap.idx, c.snap.data, c.snap.crc)
	}
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
	return s.pool.SendBatch(ctx, &b).Close()
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
