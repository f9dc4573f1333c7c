package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// readPage bounds how many events, and roughly how many bytes, GetEvents
// copies out of one read transaction before it calls back.
const (
	readPageEvents = 1024
	readPageBytes  = 4 << 20
)

// maxSummedSnapshots bounds the snapshots bucket that GetSnapshot walks
// whole, to compare with the summary, rather than reading its last
// snapshot alone.
const maxSummedSnapshots = 8

// GetEvents implements [durability.Store]. It copies events out of short
// read transactions, a page at a time, and calls fn outside of them, so fn
// may use the store.
func (s *Store) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	// One checker for all pages: its Summer is made once per read.
	check := checker{kind: durability.RecordEvent, name: name}
	var whole pagesWalk
	for {
		var page []entry
		more := false
		err := s.view(ctx, durability.OpGetEvents, name, func(tx *bolt.Tx, pending *pendingActor) error {
			var err error
			page, more, err = s.readPage(tx, &check, &whole, pending, from, to)
			return err
		})
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e.index, e.data); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		last := page[len(page)-1].index
		if last == math.MaxUint64 {
			return nil
		}
		from = last + 1
	}
}

// pagesWalk is the walk of an actor's events bucket by the pages of one
// GetEvents, each read in a transaction of its own. While every page
// finds the same summary of the actor's events, they walk the bucket as
// one transaction would (a checkpoint that changes the bucket changes
// its summary: its count, bounds or sum of checksums, unless changes
// whose checksums differ by sums that cancel out, a chance of one in
// 2^32 that would report damage where there is none), so a walk from
// the bucket's first entry to its end is compared with the summary.
// Other actors' commits between pages do not stop the check; writes of
// the actor not yet checkpointed that delete the events a page would
// walk first do, as do a page that cuts off bucket entries it walked (to
// make room for the overlay's) and one that finds no bucket to walk.
type pagesWalk struct {
	started bool
	same    bool       // every page so far walked the bucket from where the one before it stopped, and found events
	events  bucketStat // the summary of the actor's events the first page found
	w       walkCheck
}

// readPage returns up to a page of the events of check's actor in
// [from, to), from its bucket with its overlay (pending, may be nil) on
// top, copied and checked with check, the actor's events checker; more
// says whether events may follow the page. whole carries the walk of the
// bucket from the read's earlier pages to this one.
func (s *Store) readPage(tx *bolt.Tx, check *checker, whole *pagesWalk, pending *pendingActor, from, to uint64) (page []entry, more bool, err error) {
	name := check.name
	var over *pendingLog
	if pending != nil {
		over = &pending.events
	}
	// Bucket entries the overlay deleted are skipped by starting after them.
	start, bucketVisible := from, true
	if over != nil && over.hides(start) {
		start = over.deletedThrough + 1
		bucketVisible = over.deletedThrough != math.MaxUint64
	}
	var stored []entry
	walked := false // the page walked the actor's events bucket
	if ab := actorBucket(tx, name); ab != nil && bucketVisible {
		sm, err := s.readSummary(ab, name)
		if err != nil {
			return nil, false, err
		}
		b := ab.Bucket(eventsBucket)
		if b == nil && sm.events.count > 0 {
			return nil, false, &durability.DamageError{Store: s.path, What: "events bucket", Offset: -1, Reason: fmt.Sprintf("missing, its summary says it holds %d", sm.events.count)}
		}
		if b != nil {
			// A walk from the bucket's first entry to its end is compared
			// with the summary: records lost to a damaged page are found.
			// A walk of part of it is compared with what the summary says
			// of the indexes it meets.
			if !whole.started {
				*whole = pagesWalk{started: true, same: true, events: sm.events, w: walkCheck{first: start <= sm.events.min}}
			} else if sm.events != whole.events || start != from {
				// A checkpoint changed the events, or writes not yet
				// checkpointed deleted those this page would have
				// walked first: the pages no longer walk the bucket
				// the summary counts as one.
				whole.same = false
			}
			walked = true
			w := walkCheck{first: start <= sm.events.min}
			ic := newIndexCheck(sm.events, start)
			size := 0
			c := b.Cursor()
			k, v := c.Seek(indexKey(start))
			for ; k != nil; k, v = c.Next() {
				if len(k) != 8 {
					return nil, false, s.damagedKey(durability.RecordEvent, k)
				}
				i := decodeIndex(k)
				if to != 0 && i >= to {
					break
				}
				if !ic.meet(i) && !s.legacy {
					return nil, false, s.misplaced(durability.RecordEvent, &ic, i, v)
				}
				if len(stored) == readPageEvents || (len(stored) > 0 && size+len(v) > readPageBytes) {
					more = true
					break
				}
				data, err := s.openValue(check, i, v)
				if err != nil {
					return nil, false, err
				}
				stored = append(stored, entry{index: i, data: data})
				size += len(v)
				w.count++
				w.sum += storedSum(v)
			}
			whole.w.count += w.count
			whole.w.sum += w.sum
			if k == nil && !s.legacy {
				switch {
				case w.first:
					err = s.verifyWalk(durability.RecordEvent, w, sm.events)
				case whole.same && whole.w.first:
					err = s.verifyWalk(durability.RecordEvent, whole.w, sm.events)
				case !ic.atEnd(start):
					err = s.misplaced(durability.RecordEvent, &ic, ic.last, nil)
				}
				if err != nil {
					return nil, false, err
				}
			}
		}
	}
	if !walked {
		whole.same = false // a later page that finds the bucket walks it from elsewhere
	}
	var fresh []entry
	if over != nil {
		fresh = over.putsIn(from, to)
		if more { // the rest of the overlay belongs to later pages
			last := stored[len(stored)-1].index
			fresh = slices.DeleteFunc(fresh, func(e entry) bool { return e.index > last })
		}
		for i := range fresh {
			fresh[i].data = bytes.Clone(fresh[i].data)
		}
	}
	page = merge(stored, fresh)
	if len(page) > readPageEvents {
		// The next page walks again the bucket's entries cut off here.
		page, more = page[:readPageEvents], true
		whole.same = false
	}
	return page, more, nil
}

// GetSnapshot implements [durability.Store].
func (s *Store) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	var best entry
	var ok bool
	err := s.view(ctx, durability.OpGetSnapshot, name, func(tx *bolt.Tx, pending *pendingActor) error {
		if ab := actorBucket(tx, name); ab != nil {
			sm, err := s.readSummary(ab, name)
			if err != nil {
				return err
			}
			var k, v []byte
			b := ab.Bucket(snapshotsBucket)
			if b != nil {
				k, v = b.Cursor().Last()
			}
			if k != nil && len(k) != 8 {
				return s.damagedKey(durability.RecordSnapshot, k)
			}
			// The last snapshot alone is read: it must be the one the
			// summary names and, when the bucket holds a few (at most
			// maxSummedSnapshots), the walk of them all must find the
			// checksums the summary sums (an older value written at the
			// same index, on a page freed since that a broken pointer
			// leads to, has its own). A longer history, kept with
			// KeepHistory, is not walked for one snapshot.
			if !s.legacy && ((k == nil) != (sm.snapshots.count == 0) || k != nil && decodeIndex(k) != sm.snapshots.max) {
				return &durability.DamageError{Store: s.path, What: "snapshots bucket", Offset: -1,
					Reason: fmt.Sprintf("its last snapshot is not the one its summary names (%d snapshots, the last at %d)", sm.snapshots.count, sm.snapshots.max)}
			}
			if !s.legacy && k != nil && sm.snapshots.count <= maxSummedSnapshots {
				if err := s.sumSnapshots(b, sm.snapshots, v); err != nil {
					return err
				}
			}
			if k != nil && (pending == nil || !pending.snapshots.hides(decodeIndex(k))) {
				data, err := s.openValue(&checker{kind: durability.RecordSnapshot, name: name}, decodeIndex(k), v)
				if err != nil {
					return err
				}
				best, ok = entry{index: decodeIndex(k), data: data}, true
			}
		}
		if pending != nil {
			if e, found := pending.snapshots.latest(); found && (!ok || e.index >= best.index) {
				best, ok = entry{index: e.index, data: bytes.Clone(e.data)}, true
			}
		}
		return nil
	})
	if err != nil || !ok {
		return durability.Snapshot{}, false, err
	}
	return durability.Snapshot{Index: best.index, Data: best.data}, true, nil
}

// sumSnapshots walks b, a snapshots bucket whose summary st counts at
// most maxSummedSnapshots, and compares the count and the sum of the
// checksums it finds with st; last is the value of its last snapshot,
// whose offset a mismatch names.
func (s *Store) sumSnapshots(b *bolt.Bucket, st bucketStat, last []byte) error {
	var w walkCheck
	c := b.Cursor()
	for k, v := c.First(); k != nil && w.count <= st.count; k, v = c.Next() {
		if len(k) != 8 {
			return s.damagedKey(durability.RecordSnapshot, k)
		}
		w.count++
		w.sum += storedSum(v)
	}
	if w.count != st.count || w.sum != st.sum {
		return &durability.DamageError{Store: s.path, What: "snapshots bucket", Offset: s.fileOffset(last),
			Reason: fmt.Sprintf("its snapshots are not those its summary names (%d, the last at %d; their checksums differ, or their count): old ones read from a page freed since, or snapshots lost to damaged pages", st.count, st.max)}
	}
	return nil
}

// actorBucket returns name's actor bucket, or nil if absent.
func actorBucket(tx *bolt.Tx, name string) *bolt.Bucket {
	actors := tx.Bucket(actorsBucket)
	if actors == nil {
		return nil
	}
	return actors.Bucket([]byte(name))
}

// view runs fn in a read transaction together with name's pending writes
// (nil if none), unless name is invalid or quarantined, the store is
// closed or ctx is done.
func (s *Store) view(ctx context.Context, op, name string, fn func(*bolt.Tx, *pendingActor) error) error {
	if !validName(name) {
		return &durability.StoreError{Op: op, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := durability.ErrClosed
	if !s.closed {
		err = ctx.Err()
	}
	if err == nil {
		s.viewMu.RLock()
		if q := s.quarantine[name]; q != nil {
			err = q.err
		} else {
			pending := s.pending(name)
			err = s.viewTx("reading", func(tx *bolt.Tx) error { return fn(tx, pending) })
		}
		s.viewMu.RUnlock()
	}
	if err != nil {
		return &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return nil
}
