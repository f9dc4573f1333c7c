package boltstore

import (
	"context"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// salvageLocking, when set (by tests), is called by Salvage before it
// waits for a Compact under way.
var salvageLocking func()

// Salvaged says what [Store.Salvage] kept of an actor.
type Salvaged = durability.Salvaged

var _ durability.Salvager = (*Store)(nil)

// Salvage lets a damaged actor be recovered again, by dropping state: it
// keeps name's newest intact snapshot and the intact events that follow it
// without a gap (from index 0 if no snapshot is intact), and deletes
// everything else of name: damaged records, the events after the first
// damaged or missing one, older snapshots and the events below the kept
// snapshot. Recovery then resumes from the last intact snapshot. What is
// dropped is lost, so a store never does this on its own: the caller asks
// for it, after reading the damage (see [Verify]).
//
// A quarantined actor (its bucket found damaged by a checkpoint, or its
// writes in the log damaged) gets its intact pending writes applied first,
// the records whose writes were lost dropped (each counted in Dropped,
// as a damaged record in its bucket is), and is released from
// quarantine.
//
// An actor whose own pages in the file are damaged (Open found them so,
// and quarantined it) is read from its pages that are intact, not through
// bbolt; its damaged bucket is set aside in the file (kept, never read
// again, until [Store.Compact] drops it) and replaced by what is kept.
//
// Salvage runs between two commits (writes wait) after a checkpoint, and
// waits for a [Store.Compact] under way (or until ctx is done). It
// cannot help when the log is damaged beyond attributing the damage to
// actors (Open refuses the file).
func (s *Store) Salvage(ctx context.Context, name string) (Salvaged, error) {
	const op = "salvage"
	var out Salvaged
	if !validName(name) {
		return out, &durability.StoreError{Op: op, Name: name, Err: durability.InvalidName(name, MaxNameLen)}
	}
	// A Compact under way has copied the buckets and copies the log at
	// its end: the checkpoint below would move writes out of the log and
	// into buckets the copy no longer reads, and the compacted file would
	// lose them.
	if salvageLocking != nil {
		salvageLocking()
	}
	if err := s.lockCompact(ctx); err != nil {
		return out, &durability.StoreError{Op: op, Name: name, Err: err}
	}
	defer s.unlockCompact()
	err := s.inCommitter(ctx, func() error {
		if err := s.checkpoint(); err != nil {
			return err
		}
		s.viewMu.RLock()
		q, pend := s.quarantine[name], s.pending(name)
		s.viewMu.RUnlock()
		var relog *overlay
		var next uint64
		err := s.updateTx("salvaging", func(tx *bolt.Tx) (err error) {
			out = Salvaged{}
			dir, err := s.readDirectory(tx)
			if err != nil {
				return err
			}
			old := dir
			if err := s.salvageTx(tx, name, q, pend, &dir, &out); err != nil {
				return err
			}
			if dir != old {
				if err := writeDirectory(tx, dir); err != nil {
					return err
				}
			}
			if q != nil {
				relog, next, err = s.resetLog(tx, name)
			}
			return err
		})
		if err != nil || q == nil {
			return err
		}
		s.viewMu.Lock()
		delete(s.quarantine, name)
		s.quarantined.Add(-1)
		s.overlay = relog
		s.viewMu.Unlock()
		s.nextSeq, s.logStart = next, 0
		s.log.Info("boltstore: actor salvaged and released from quarantine", "path", s.path, "actor", quote.Name(name, "actor name"), "kept", out)
		return nil
	})
	if err != nil {
		return out, &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return out, nil
}

// salvageTx does Salvage's work on name's bucket in tx: for a quarantined
// actor, applies its pending writes and drops its lost records first;
// then keeps the newest intact snapshot and the intact run of events
// after it, and rewrites the summary (or removes the bucket, from dir too,
// if nothing is kept).
func (s *Store) salvageTx(tx *bolt.Tx, name string, q *quarantined, pend *pendingActor, dir *directory, out *Salvaged) error {
	actors := tx.Bucket(actorsBucket)
	if q != nil && q.pages != nil {
		if err := s.setAside(tx, name, q.pages, q.skip); err != nil {
			return err
		}
	}
	ab := actors.Bucket([]byte(name))
	if q != nil {
		out.Dropped += lostDropped(pend, q.lost)
		if ab == nil && pend != nil && len(pend.events.puts)+len(pend.snapshots.puts) > 0 {
			var err error
			if ab, err = actors.CreateBucket([]byte(name)); err != nil {
				return err
			}
			dir.count++
			dir.sum += nameSum([]byte(name))
		}
		if ab != nil {
			if err := applyUnchecked(ab, pend, q.lost); err != nil {
				return err
			}
		}
	}
	if ab == nil {
		return nil
	}
	var sm summary
	if b := ab.Bucket(snapshotsBucket); b != nil {
		var drop [][]byte
		c := b.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if len(k) == 8 && !out.Snapshot {
				if _, err := s.openValue(&checker{kind: durability.RecordSnapshot, name: name}, decodeIndex(k), v); err == nil {
					out.Snapshot, out.SnapshotIndex = true, decodeIndex(k)
					sm.snapshots = bucketStat{count: 1, min: out.SnapshotIndex, max: out.SnapshotIndex, sum: storedSum(v)}
					continue
				}
			}
			drop = append(drop, slices.Clone(k))
		}
		if err := deleteKeys(ab, snapshotsBucket, b, drop, sm.snapshots.count); err != nil {
			return err
		}
		out.Dropped += len(drop)
	}
	out.From = out.SnapshotIndex
	if b := ab.Bucket(eventsBucket); b != nil {
		var drop [][]byte
		next, run := out.From, true
		check := checker{kind: durability.RecordEvent, name: name}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			keep := false
			if run && len(k) == 8 && decodeIndex(k) >= out.From {
				if i := decodeIndex(k); i == next {
					if _, err := s.openValue(&check, i, v); err == nil {
						keep = true
						next++
						st := &sm.events
						if st.count == 0 {
							st.min = i
						}
						st.count++
						st.max = i
						st.sum += storedSum(v)
					}
				}
				run = keep // the first damaged or missing event ends the run
			}
			if !keep {
				drop = append(drop, slices.Clone(k))
			}
		}
		if err := deleteKeys(ab, eventsBucket, b, drop, sm.events.count); err != nil {
			return err
		}
		out.Dropped += len(drop)
		out.Events = int(sm.events.count)
	}
	if sm.events.count > 0 || sm.snapshots.count > 0 {
		return ab.Put(summaryKey, encodeSummary(name, sm))
	}
	dir.count--
	dir.sum -= nameSum([]byte(name))
	return actors.DeleteBucket([]byte(name))
}

// lostDropped counts the records of lost (lostRecord records) that
// Salvage drops: a put whose data was lost in the log, once per kind and
// index, unless a later write of pend replaced it or deleted it (see
// [pendingActor.droppedLost]). Such a record never reached the actor's
// bucket, but it was written, and it is counted as the other stores count
// a damaged record they drop.
func lostDropped(pend *pendingActor, lost []record) int {
	type key struct {
		snapshot bool
		index    uint64
	}
	counted := map[key]bool{}
	for _, r := range lost {
		k := key{r.lostSnapshot, r.index}
		// A put at the index lost before a delete covered it and one
		// lost after count once, as the latter.
		counted[k] = counted[k] || pend.droppedLost(r)
	}
	n := 0
	for _, c := range counted {
		if c {
			n++
		}
	}
	return n
}

// applyUnchecked applies a quarantined actor's pending writes to its
// bucket ab without its summary (Salvage rewrites it) and deletes the
// records whose writes were lost: what is stored under them is older than
// the lost write.
func applyUnchecked(ab *bolt.Bucket, pend *pendingActor, lost []record) error {
	for _, kind := range []durability.RecordKind{durability.RecordEvent, durability.RecordSnapshot} {
		which := bucketFor(kind)
		var l *pendingLog
		if pend != nil {
			l = &pend.events
			if kind == durability.RecordSnapshot {
				l = &pend.snapshots
			}
		}
		b := ab.Bucket(which)
		if l != nil && len(l.puts) > 0 && b == nil {
			var err error
			if b, err = ab.CreateBucket(which); err != nil {
				return err
			}
		}
		if b == nil {
			continue
		}
		var drop [][]byte
		if l != nil && l.deleted {
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if len(k) == 8 && decodeIndex(k) <= l.deletedThrough {
					drop = append(drop, slices.Clone(k))
				}
			}
		}
		for _, r := range lost {
			if r.lostSnapshot == (kind == durability.RecordSnapshot) {
				drop = append(drop, indexKey(r.index))
			}
		}
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if l != nil {
			for _, e := range l.putsIn(0, 0) {
				if err := b.Put(indexKey(e.index), sealWithSum(nil, e.sum, e.data)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// deleteKeys deletes keys from b, a sub-bucket of ab, or b itself when
// nothing is kept in it.
func deleteKeys(ab *bolt.Bucket, which []byte, b *bolt.Bucket, keys [][]byte, kept uint64) error {
	if kept == 0 {
		return ab.DeleteBucket(which)
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// setAside replaces the bucket of actor name, whose pages are damaged
// (header is its bucket header and skip the pages to leave out, see
// [actorPages]), by a new bucket
// holding the records that could be read from its pages, unchecked (the
// rest of Salvage checks them). The damaged bucket is moved, without
// being read, into a bucket of the "set-aside" bucket: bbolt cannot free
// pages it cannot read, so they stay in use there until Compact drops
// them. The file's format becomes "6" (see [formatVersionSetAside]).
func (s *Store) setAside(tx *bolt.Tx, name string, header []byte, skip []uint64) error {
	events, snapshots, err := s.rawActor(header, skip)
	if err != nil {
		return err
	}
	grave, err := tx.CreateBucketIfNotExists(setAsideBucket)
	if err != nil {
		return err
	}
	if err := tx.Bucket(metaBucket).Put(formatKey, []byte(formatVersionSetAside)); err != nil {
		return err
	}
	seq, err := grave.NextSequence()
	if err != nil {
		return err
	}
	g, err := grave.CreateBucket(indexKey(seq))
	if err != nil {
		return err
	}
	actors := tx.Bucket(actorsBucket)
	if err := actors.MoveBucket([]byte(name), g); err != nil {
		return err
	}
	ab, err := actors.CreateBucket([]byte(name))
	if err != nil {
		return err
	}
	for which, elems := range map[string][]rawElem{string(eventsBucket): events, string(snapshotsBucket): snapshots} {
		if len(elems) == 0 {
			continue
		}
		b, err := ab.CreateBucket([]byte(which))
		if err != nil {
			return err
		}
		for _, e := range elems {
			if len(e.key) != 8 {
				continue
			}
			if err := b.Put(e.key, e.value); err != nil {
				return err
			}
		}
	}
	return nil
}
