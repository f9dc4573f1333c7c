package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// writeKind says what a write does. Its value is stored in the log.
type writeKind uint8

const (
	putEvent writeKind = iota
	putSnapshot
	deleteEvents
	deleteSnapshots
	// lostRecord stands for a put whose data was lost to damage (flags
	// bit 1: a snapshot, else an event): the store re-logs it with a
	// quarantined actor's writes so that the quarantine outlives a
	// restart. It changes no state.
	lostRecord
)

// flagLostSnapshot marks a lostRecord that stood for a snapshot.
const flagLostSnapshot = 2

// what names the kind in error messages.
func (k writeKind) what() string {
	switch k {
	case putEvent:
		return "event"
	case putSnapshot:
		return "snapshot"
	case deleteEvents:
		return "delete of events through"
	case deleteSnapshots:
		return "delete of snapshots through"
	default:
		return "lost record"
	}
}

func (k writeKind) op() string {
	switch k {
	case putEvent:
		return durability.OpPersistEvent
	case putSnapshot:
		return durability.OpPersistSnapshot
	case deleteEvents:
		return durability.OpDeleteEvents
	default:
		return durability.OpDeleteSnapshots
	}
}

// write is one call's mutation waiting for the committer: its records
// (several for PersistEvents), their framed encoding for the log (the
// records' data alias it), and done, which receives its outcome exactly
// once. The records of one write always commit in the same transaction.
type write struct {
	recs []record
	enc  []byte
	done chan error
	run  func() error // instead of records: work the committer runs between commits
}

// newWrite is the New of a store's pool of writes ([Store].writePool). The
// pool is the store's own, not the package's: a store opened inside a
// testing/synctest bubble makes its channels there, and a receive on
// one from outside the bubble (a store opened elsewhere taking it from a
// shared pool) is a fatal error of the whole process.
func newWrite() any { return &write{recs: make([]record, 0, 1), done: make(chan error, 1)} }

// maxKeptRecords bounds the record slice a pooled write keeps after a
// large PersistEvents.
const maxKeptRecords = 64

// maxDataSize keeps a log value within bbolt's value limit.
const maxDataSize = bolt.MaxValueSize - bolt.MaxKeySize - 64

// PersistEvent implements [durability.Store]. It returns once the
// transaction holding the event is committed and fsync'd.
func (s *Store) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	return s.submitOne(ctx, putEvent, name, index, data)
}

// PersistSnapshot implements [durability.Store]. The snapshot and the
// compaction it implies are committed as one log entry.
func (s *Store) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	return s.submitOne(ctx, putSnapshot, name, index, data)
}

// PersistEvents implements [durability.Store]. The batch is one write: its
// events are framed into the same log value (or values, if it exceeds
// bbolt's value limit) of one commit, so they become durable together,
// sharing that commit's fsync with other writers.
func (s *Store) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if !validName(name) {
		return &durability.StoreError{Op: durability.OpPersistEvents, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	if len(data) == 0 {
		return s.check(ctx, durability.OpPersistEvents, name)
	}
	if first+uint64(len(data)-1) < first {
		return &durability.StoreError{Op: durability.OpPersistEvents, Name: name, Err: durability.ErrIndexOverflow}
	}
	w := s.writePool.Get().(*write)
	for k, d := range data {
		w.recs = append(w.recs, record{kind: putEvent, name: name, index: first + uint64(k), data: d})
	}
	return s.submit(ctx, durability.OpPersistEvents, w)
}

// DeleteEvents implements [durability.Store].
func (s *Store) DeleteEvents(ctx context.Context, name string, through uint64) error {
	return s.submitOne(ctx, deleteEvents, name, through, nil)
}

// DeleteSnapshots implements [durability.Store].
func (s *Store) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	return s.submitOne(ctx, deleteSnapshots, name, through, nil)
}

// validName reports whether name can be an actor bucket's key.
func validName(name string) bool { return name != "" && len(name) <= MaxNameLen }

// submitOne hands a write of one record to the committer and waits for
// its commit.
func (s *Store) submitOne(ctx context.Context, kind writeKind, name string, index uint64, data []byte) error {
	if !validName(name) {
		return &durability.StoreError{Op: kind.op(), Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	w := s.writePool.Get().(*write)
	w.recs = append(w.recs, record{kind: kind, compact: kind == putSnapshot && !s.keepHistory, name: name, index: index, data: data})
	return s.submit(ctx, kind.op(), w)
}

// submit encodes w's records, hands w to the committer, waits for its
// commit and puts w back in the store's pool of writes. w's records all have the same name.
func (s *Store) submit(ctx context.Context, op string, w *write) error {
	name := w.recs[0].name
	size := 0
	for _, r := range w.recs {
		size += len(r.data)
	}
	var err error
	if q := s.quarantineOf(name); q != nil {
		err = q.err
	} else if size > maxDataSize {
		// The same data never fits: asking again cannot help.
		err = durability.Permanent(fmt.Errorf("%d bytes, over the %d a write may hold: %w", size, maxDataSize, bolterrors.ErrValueTooLarge))
	} else {
		w.enc = encodeRecords(w.recs)
		err = s.handOff(ctx, w)
	}
	clear(w.recs)
	recs := w.recs[:0]
	if cap(recs) > maxKeptRecords {
		recs = make([]record, 0, 1)
	}
	*w = write{recs: recs, done: w.done}
	s.writePool.Put(w)
	if err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return nil
}

// quarantineOf returns name's quarantine, or nil.
func (s *Store) quarantineOf(name string) *quarantined {
	if s.quarantined.Load() == 0 {
		return nil
	}
	s.viewMu.RLock()
	defer s.viewMu.RUnlock()
	return s.quarantine[name]
}

// handOff hands w to the committer and waits for its outcome.
func (s *Store) handOff(ctx context.Context, w *write) error {
	s.writers.Add(1)
	s.mu.RLock()
	err := s.enqueue(ctx, w)
	s.mu.RUnlock()
	if err == nil {
		s.queued.Add(1)
		s.wakeIfGathered()
		err = <-w.done
	}
	s.writers.Add(-1)
	s.wakeIfGathered()
	return err
}

// wakeIfGathered wakes the committer if it is gathering and every writer
// inside submit has queued or is in its batch. Writers call it after each
// change of the counts (queued, left), the committer checks the same
// condition after each of its own before it sleeps, and the counts are
// atomic: the change that makes the condition true is always seen by a
// check made after it.
func (s *Store) wakeIfGathered() {
	if s.gathering.Load() && s.gathered.Load()+s.queued.Load() >= s.writers.Load() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// inCommitter runs fn on the committer goroutine, between two commits, so
// that it sees every write committed before and none in flight; it
// returns fn's error.
func (s *Store) inCommitter(ctx context.Context, fn func() error) error {
	return s.handOff(ctx, &write{run: fn, done: make(chan error, 1)})
}

// check returns the error an operation on name would fail with before
// doing anything: the store is closed or ctx is done.
func (s *Store) check(ctx context.Context, op, name string) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	err := ctx.Err()
	if closed {
		err = durability.ErrClosed
	}
	if err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return nil
}

// enqueue sends w to the committer unless the store is closed or ctx is
// done first. s.mu must be held shared.
func (s *Store) enqueue(ctx context.Context, w *write) error {
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

// commitLoop is the committer goroutine: it takes the first waiting write,
// waits until every writer inside submit has queued its write or left (so
// that writers it has just answered can queue their next write rather than
// start a commit of their own), for at most batchDelay if positive, adds
// every write already queued, up to maxBatch, commits them in one
// transaction and reports to each. While a commit's fsync runs, new writes
// queue up for the next one, so concurrent writers share fsyncs without any
// fixed delay.
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	batch := make([]*write, 0, s.maxBatch)
	var timer *time.Timer
	for {
		first, ok := <-s.writes
		if !ok {
			return
		}
		s.queued.Add(-1)
		batch = append(batch[:0], first)
		open := true
		var deadline <-chan time.Time
		if s.batchDelay > 0 {
			if timer == nil {
				timer = time.NewTimer(s.batchDelay)
			} else {
				timer.Reset(s.batchDelay)
			}
			deadline = timer.C
		}
		// A writer counted in s.writers but not in batch is running: it is
		// about to queue, or has its answer and is about to leave submit.
		// So the wait is short even without batchDelay. The committer
		// takes what is queued and sleeps until the last of them wakes it
		// (see wakeIfGathered): woken by every write, it slept and woke
		// about 40 times a commit with 64 writers.
		s.gathered.Store(int64(len(batch)))
		s.gathering.Store(true)
	gather:
		for len(batch) < s.maxBatch && len(batch) < int(s.writers.Load()) {
			select {
			case w, ok := <-s.writes:
				if !ok {
					open = false
					break gather
				}
				s.queued.Add(-1)
				batch = append(batch, w)
				s.gathered.Store(int64(len(batch)))
				continue
			default:
			}
			if s.gathered.Load()+s.queued.Load() >= s.writers.Load() {
				continue // what is missing is in the channel
			}
			select {
			case <-s.wake:
			case <-deadline:
				break gather
			}
		}
		s.gathering.Store(false)
		if timer != nil {
			timer.Stop()
		}
	drain:
		for open && len(batch) < s.maxBatch {
			select {
			case w, ok := <-s.writes:
				if !ok {
					break drain
				}
				s.queued.Add(-1)
				batch = append(batch, w)
			default:
				break drain
			}
		}
		s.commitAll(batch)
		clear(batch)
	}
}

// commitAll commits batch in order: runs of writes together, and the
// work of inCommitter calls between them.
func (s *Store) commitAll(batch []*write) {
	start := 0
	for i, w := range batch {
		if w.run == nil {
			continue
		}
		if i > start {
			s.commit(batch[start:i])
		}
		w.done <- w.run()
		start = i + 1
	}
	if start < len(batch) {
		s.commit(batch[start:])
	}
}

// commit appends batch to the log in one transaction, with the steps of
// a checkpoint under way (see [step]), reports to each writer, then starts
// a checkpoint if the log is due. If the steps fail, the batch is
// committed again without them: an actor whose data they found damaged is
// quarantined, other failures are logged and retried by later commits.
// If the transaction fails otherwise and the batch has more than one
// write, each write is retried alone so that one bad write fails alone.
func (s *Store) commit(batch []*write) {
	p := s.planSteps(batch)
	err := s.appendLog(batch, p)
	if err != nil && p != nil {
		if !s.quarantineFor(err) {
			s.log.Warn("boltstore checkpoint step failed; the writes stay in the log", "err", err)
		}
		err = s.appendLog(batch, nil)
	}
	switch {
	case err != nil && len(batch) > 1:
		s.log.Warn("boltstore batch commit failed; retrying writes one by one", "writes", len(batch), "err", err)
		for _, w := range batch {
			w.done <- s.appendLog([]*write{w}, nil)
		}
	default:
		if err != nil {
			s.log.Warn("boltstore commit failed", "op", batch[0].recs[0].kind.op(), "name", quote.Name(batch[0].recs[0].name, "actor name"), "err", err)
		}
		for _, w := range batch {
			w.done <- err
		}
	}
	s.maybeFreeze()
}

// appendLog commits batch to the log, with p's checkpoint steps (nil:
// none), and once committed applies it to the overlay. The batch goes
// into one log value (see [frameBatch]) under the next log key, so a
// commit adds one B+tree entry at the log's end whatever the number of
// writes or actors involved. When p finishes the checkpoint, the same
// transaction deletes the log's entries before the cut and relogs, first,
// the pending writes of quarantined actors.
func (s *Store) appendLog(batch []*write, p *plan) error {
	var relog *overlay
	var relogValues [][]byte
	if p != nil && p.retire {
		relog, relogValues = s.relogValues("")
	}
	values := s.frameBatch(batch)
	if n := 8 * (len(relogValues) + len(values)); len(s.keyBuf) < n {
		s.keyBuf = make([]byte, n) // bbolt keeps the keys until the commit
	}
	next := s.nextSeq
	err := s.updateTx("committing", func(tx *bolt.Tx) error {
		wal := tx.Bucket(walBucket)
		wal.FillPercent = 1 // keys only grow: pack pages full
		i := 0
		for _, vs := range [2][][]byte{relogValues, values} {
			for _, v := range vs {
				key := binary.BigEndian.AppendUint64(s.keyBuf[8*i:8*i], next)
				if err := putLogValue(wal, key, sealLogValue(next, v)); err != nil {
					return err
				}
				next++
				i++
			}
		}
		if p != nil {
			if err := s.flush(tx, p.steps); err != nil {
				return err
			}
			if p.retire {
				if err := s.dropLog(tx, wal); err != nil {
					return err
				}
			}
		}
		// The log's length, in the bucket's header (which the commit
		// rewrites anyway): replay finds entries lost to damage.
		return wal.SetSequence(next)
	})
	clear(values) // drop references to large buffers the next commit may not reuse
	if err != nil {
		return err
	}
	s.nextSeq = next
	if p != nil {
		s.steps = s.steps[len(p.steps):]
	}
	s.viewMu.Lock()
	if p != nil && p.retire {
		s.flushing = nil
		for name, a := range relog.actors {
			s.overlay.actors[name] = a
		}
		s.logStart, s.cut = s.cut, 0
	}
	for _, w := range batch {
		for _, r := range w.recs {
			s.overlay.apply(r)
		}
	}
	s.viewMu.Unlock()
	return nil
}

// dropLog deletes the log entries before the cut, which the checkpoint
// that ends in tx has moved into the buckets, and records the new start.
func (s *Store) dropLog(tx *bolt.Tx, wal *bolt.Bucket) error {
	for seq := s.logStart; seq < s.cut; seq++ {
		if err := deleteLogEntry(wal, indexKey(seq)); err != nil {
			return err
		}
	}
	return writeLogStart(tx, s.cut)
}

// maxLogValueSize is the largest log value a batch is framed into; a
// variable so that tests can split batches without gigabytes of data.
var maxLogValueSize = bolt.MaxValueSize

// maxKeptFrameBuf bounds the framing buffer the committer keeps between
// commits, so that one batch of large snapshots does not pin its memory.
const maxKeptFrameBuf = 1 << 20

// frameBatch frames batch's records into log values, in s.frameBuf (see
// [frameInto]). The values stay valid until the next
// call; only the committer calls it.
//
// The returned slice is s.frameValues: its elements must be cleared before
// the next call.
func (s *Store) frameBatch(batch []*write) [][]byte {
	values, buf := frameIntoValues(s.frameBuf[:0], s.frameValues[:0], batch)
	if cap(buf) <= maxKeptFrameBuf {
		s.frameBuf = buf[:0]
	} else {
		s.frameBuf = nil
	}
	s.frameValues = values[:0]
	return values
}

// frameInto frames batch's records into new log values: one value unless
// the batch exceeds bbolt's value limit, then as few as fit. Each value
// starts with room for its checksum ([sealLogValue]).
func frameInto(buf []byte, batch []*write) ([][]byte, []byte) {
	return frameIntoValues(buf, nil, batch)
}

// frameIntoValues is frameInto appending to buf and values.
func frameIntoValues(buf []byte, values [][]byte, batch []*write) ([][]byte, []byte) {
	buf = append(buf, make([]byte, crcSize)...)
	start := 0
	for _, w := range batch {
		if len(buf)-start+len(w.enc) <= maxLogValueSize {
			buf = append(buf, w.enc...)
			continue
		}
		// Split between records (a write's records may go to several
		// values: they are all in the same transaction).
		for enc := w.enc; len(enc) > 0; {
			frame, rest, _ := nextFrame(enc) // framed by encodeRecords
			if len(buf)-start > crcSize && len(buf)-start+len(frame) > maxLogValueSize {
				values, start = append(values, buf[start:]), len(buf)
				buf = append(buf, make([]byte, crcSize)...)
			}
			buf, enc = append(buf, frame...), rest
		}
	}
	return append(values, buf[start:]), buf
}
