package boltstore

import (
	"context"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// Salvaged says what [Store.Salvage] kept of an actor.
type Salvaged struct {
	Snapshot      bool   // an intact snapshot was kept
	SnapshotIndex uint64 // its index
	Events        int    // intact events kept, at indexes From, From+1, ...
	From          uint64 // SnapshotIndex, or 0 without a snapshot
	Dropped       int    // records deleted
}

// Salvage lets a damaged actor be recovered again, by dropping state: it
// keeps name's newest intact snapshot and the intact events that follow it
// without a gap (from index 0 if no snapshot is intact), and deletes
// everything else of name: damaged records, the events after the first
// damaged or missing one, older snapshots and the events below the kept
// snapshot. Recovery then resumes from the last intact snapshot. What is
// dropped is lost, so a store never does this on its own: the caller asks
// for it, after reading the damage (see [Verify]).
//
// Salvage runs between two commits (writes wait) after a checkpoint. It
// cannot help when the log is damaged (Open refuses the file) or when the
// actor's pages are too damaged for bbolt to walk (it returns the
// *durability.DamageError).
func (s *Store) Salvage(ctx context.Context, name string) (Salvaged, error) {
	const op = "salvage"
	var out Salvaged
	if !validName(name) {
		return out, &durability.StoreError{Op: op, Name: name, Err: durability.ErrInvalidName}
	}
	err := s.inCommitter(ctx, func() error {
		if err := s.checkpoint(); err != nil {
			return err
		}
		s.viewMu.Lock()
		defer s.viewMu.Unlock()
		out = Salvaged{}
		return s.updateTx("salvaging", func(tx *bolt.Tx) error {
			actors := tx.Bucket(actorsBucket)
			ab := actors.Bucket([]byte(name))
			if ab == nil {
				return nil
			}
			var sm summary
			if b := ab.Bucket(snapshotsBucket); b != nil {
				var drop [][]byte
				c := b.Cursor()
				for k, v := c.Last(); k != nil; k, v = c.Prev() {
					if len(k) == 8 && !out.Snapshot {
						if _, err := s.openValue(durability.RecordSnapshot, name, decodeIndex(k), v); err == nil {
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
				c := b.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					keep := false
					if run && len(k) == 8 && decodeIndex(k) >= out.From {
						if i := decodeIndex(k); i == next {
							if _, err := s.openValue(durability.RecordEvent, name, i, v); err == nil {
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
			dir, err := s.readDirectory(tx)
			if err != nil {
				return err
			}
			dir.count--
			dir.sum -= nameSum([]byte(name))
			if err := actors.DeleteBucket([]byte(name)); err != nil {
				return err
			}
			return writeDirectory(tx, dir)
		})
	})
	if err != nil {
		return out, &durability.StoreError{Op: op, Name: name, Err: err}
	}
	return out, nil
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
