package boltstore

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// A checkpoint moves the log's writes into the per-actor buckets. Done in
// one transaction, it makes the writes queued behind it wait for a
// transaction that rewrites every touched actor's pages (measured: the
// longest write 21.7 times the median). So the committer checkpoints a
// piece at a time instead: once the log is due, it freezes the overlay
// (writes go on into a new one, and into the log after a cut), splits the
// frozen overlay into steps (part of one actor's writes each), and adds a
// few steps to each following commit's transaction, so they share its
// fsync and make it only somewhat larger. The commit that takes the last
// step also deletes the log's entries before the cut and records where
// the log now starts. Readers merge the frozen overlay and the new one on
// top of the buckets throughout: an overlay applied to buckets that hold
// part of it gives the same state (see [overlay]), and so does a crash in
// the middle: Open replays the log from its start.

// step is a piece of a checkpoint: part of one actor's writes.
type step struct {
	name              string
	events, snapshots stepLog
	records           int // for the budget
}

// stepLog is the part of one bucket's overlay a step applies.
type stepLog struct {
	deleted bool
	through uint64
	puts    []entry
}

// Checkpoint step sizes (the defaults of Store.stepRecords and
// Store.minStepRecords, which tests lower): a step carries at most
// stepRecords puts of one actor; a commit takes steps of at least
// minStepRecords records, or four times its own writes if more, so that
// the checkpoint keeps ahead of the writes.
const (
	stepRecords    = 256
	minStepRecords = 512
)

// stepsOf splits o's actors (but the quarantined) into steps of at most
// chunk puts (0: one step per actor), in name order.
func (s *Store) stepsOf(o *overlay, chunk int) []step {
	names := make([]string, 0, len(o.actors))
	for name := range o.actors {
		if !s.isQuarantined(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var steps []step
	for _, name := range names {
		a := o.actors[name]
		ev, sn := a.events.putsIn(0, 0), a.snapshots.putsIn(0, 0)
		first := step{name: name,
			events:    stepLog{deleted: a.events.deleted, through: a.events.deletedThrough},
			snapshots: stepLog{deleted: a.snapshots.deleted, through: a.snapshots.deletedThrough, puts: sn},
		}
		n := len(ev)
		if chunk > 0 {
			n = min(n, chunk)
		}
		first.events.puts, ev = ev[:n], ev[n:]
		first.records = 1 + len(first.events.puts) + len(sn)
		steps = append(steps, first)
		for len(ev) > 0 {
			n := min(len(ev), chunk)
			steps = append(steps, step{name: name, events: stepLog{puts: ev[:n]}, records: n})
			ev = ev[n:]
		}
	}
	return steps
}

// plan is what a commit does of the checkpoint under way.
type plan struct {
	steps  []step
	retire bool // the steps finish it: drop the log before the cut
}

// planSteps returns the steps the next commit, of batch, takes: nil if no
// checkpoint is under way.
func (s *Store) planSteps(batch []*write) *plan {
	if s.flushing == nil || s.compacting {
		return nil
	}
	budget := s.minStepRecords
	n := 0
	for _, w := range batch {
		n += len(w.recs)
	}
	budget = max(budget, 4*n)
	if s.due() || benchhook.CheckpointWhole.Load() { // the writes got ahead: finish it
		budget = int(^uint(0) >> 1)
	}
	k, taken := 0, 0
	for k < len(s.steps) && (k == 0 || taken+s.steps[k].records <= budget) {
		taken += s.steps[k].records
		k++
	}
	return &plan{steps: s.steps[:k], retire: k == len(s.steps)}
}

// due reports whether the overlay of new writes has reached a checkpoint
// bound.
func (s *Store) due() bool {
	return s.overlay.ops >= s.checkpointOps || s.overlay.bytes >= s.checkpointBytes
}

// maybeFreeze starts a checkpoint if the log is due and none is under way.
func (s *Store) maybeFreeze() {
	if s.flushing != nil || s.compacting || !s.due() {
		return
	}
	s.viewMu.Lock()
	s.flushing, s.overlay = s.overlay, newOverlay()
	s.viewMu.Unlock()
	s.cut = s.nextSeq
	s.steps = s.stepsOf(s.flushing, s.stepRecords)
	s.log.Debug("boltstore checkpoint started", "writes", s.flushing.ops, "steps", len(s.steps))
}

// actorError is a checkpoint's failure in one actor's data.
type actorError struct {
	name string
	err  error
}

func (e *actorError) Error() string {
	return fmt.Sprintf("actor %s: %v", quote.Name(e.name, "actor name"), e.err)
}
func (e *actorError) Unwrap() error { return e.err }

// flush applies steps to the buckets in tx, keeping the directory.
func (s *Store) flush(tx *bolt.Tx, steps []step) error {
	if len(steps) == 0 {
		return nil
	}
	dir, err := s.readDirectory(tx)
	if err != nil {
		return err
	}
	old := dir
	// bbolt keeps the keys and values put in a transaction until it
	// commits: they are written into one buffer made for it.
	size := 0
	for _, st := range steps {
		for _, e := range st.events.puts {
			size += 8 + crcSize + len(e.data)
		}
		for _, e := range st.snapshots.puts {
			size += 8 + crcSize + len(e.data)
		}
	}
	arena := make([]byte, 0, size)
	for _, st := range steps {
		if err := s.flushStep(tx, st, &arena, &dir); err != nil {
			return err
		}
	}
	if dir != old {
		return writeDirectory(tx, dir)
	}
	return nil
}

// flushStep is flushActor with its failure, and bbolt's panics on damaged
// pages, tied to the actor.
func (s *Store) flushStep(tx *bolt.Tx, st step, arena *[]byte, dir *directory) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &actorError{st.name, damaged(s.path, "actor bucket", -1, "bbolt failed while checkpointing it: %v", r)}
		}
	}()
	if err := s.flushActor(tx, st, arena, dir); err != nil {
		return &actorError{st.name, err}
	}
	return nil
}

// flushActor applies a step to its actor's bucket, sealing values into
// *arena and keeping the bucket's summary and the directory: a new actor
// bucket is added to dir, one left empty is deleted from the file and
// from dir.
func (s *Store) flushActor(tx *bolt.Tx, st step, arena *[]byte, dir *directory) error {
	name := st.name
	actors := tx.Bucket(actorsBucket)
	ab := actors.Bucket([]byte(name))
	var sm summary
	if ab == nil {
		if len(st.events.puts) == 0 && len(st.snapshots.puts) == 0 {
			return nil // deletes of what is not there
		}
		var err error
		if ab, err = actors.CreateBucket([]byte(name)); err != nil {
			return err
		}
		dir.count++
		dir.sum += nameSum([]byte(name))
	} else {
		var err error
		if sm, err = s.readSummary(ab, name); err != nil {
			return err
		}
	}
	if err := s.flushBucket(ab, durability.RecordEvent, name, st.events, &sm.events, arena); err != nil {
		return err
	}
	if err := s.flushBucket(ab, durability.RecordSnapshot, name, st.snapshots, &sm.snapshots, arena); err != nil {
		return err
	}
	if sm.events.count == 0 && sm.snapshots.count == 0 {
		dir.count--
		dir.sum -= nameSum([]byte(name))
		return actors.DeleteBucket([]byte(name))
	}
	return ab.Put(summaryKey, encodeSummary(name, sm))
}

// flushBucket applies one step's part to the sub-bucket of ab for kind,
// keeping st.
func (s *Store) flushBucket(ab *bolt.Bucket, kind durability.RecordKind, name string, l stepLog, st *bucketStat, arena *[]byte) error {
	which := bucketFor(kind)
	b := ab.Bucket(which)
	if b == nil && st.count > 0 {
		return &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: -1, Reason: fmt.Sprintf("missing, its summary says it holds %d", st.count)}
	}
	if l.deleted && b != nil {
		// Collect first: deleting while a cursor walks the bucket can skip keys.
		var keys [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return s.damagedKey(kind, k)
			}
			if decodeIndex(k) > l.through {
				break
			}
			keys = append(keys, slices.Clone(k))
			st.count--
			st.sum -= storedSum(v)
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	if len(l.puts) > 0 && b == nil {
		var err error
		if b, err = ab.CreateBucket(which); err != nil {
			return err
		}
	}
	// Above the highest index the bucket holds (its summary's, checked
	// when read), a put adds a record: the usual case, events appended,
	// spares a lookup.
	above, hi := st.count == 0, st.max
	for _, e := range l.puts {
		start := len(*arena)
		*arena = binary.BigEndian.AppendUint64(*arena, e.index)
		key := (*arena)[start:len(*arena):len(*arena)]
		if !above && e.index <= hi {
			if old := b.Get(key); old != nil {
				st.sum -= storedSum(old)
				st.count--
			}
		}
		if above || e.index > hi {
			above, hi = true, e.index
		}
		st.count++
		start = len(*arena)
		*arena = sealWithSum(*arena, e.sum, e.data)
		v := (*arena)[start:len(*arena):len(*arena)]
		if err := b.Put(key, v); err != nil {
			return err
		}
		st.sum += e.sum
	}
	if b == nil {
		return nil
	}
	if st.count == 0 {
		*st = bucketStat{}
		return ab.DeleteBucket(which)
	}
	c := b.Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	if len(first) != 8 || len(last) != 8 {
		return &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: -1, Reason: "its first or last key is not an index"}
	}
	st.min, st.max = decodeIndex(first), decodeIndex(last)
	return nil
}
