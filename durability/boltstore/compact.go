package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// CompactStats says what [Store.Compact] did.
type CompactStats struct {
	Before, After int64         // file size in bytes
	Blocked       time.Duration // how long writes waited for the final switch
}

// compactTxSize bounds the data one transaction of the copy writes (a
// variable for tests).
var compactTxSize int64 = 4 << 20

// Compact rewrites the file without its free pages, so that it shrinks
// after actors were deleted (an actor whose events and snapshots were all
// deleted is removed from the file at the next checkpoint; bbolt itself
// only reuses freed pages, never returns them).
//
// Writes go on while the bulk is copied: Compact checkpoints, then copies
// the per-actor buckets (which do not change while it runs: checkpoints
// wait) into a new file next to the store's, in transactions of a few MiB;
// only the last step runs between two commits: it copies the log written
// meanwhile into the new file, syncs it and renames it over the store's
// file, so writes wait for about one commit (CompactStats.Blocked).
//
// A Compact that fails before the rename removes the new file and leaves
// the store as it was; so does one whose ctx is done before it, which
// stops the copy at the end of its transaction under way. Once the new file is renamed over the store's, the
// store reads and writes it, whatever follows: if syncing the folder then
// fails, the rename may not survive a crash, so Compact returns a
// permanent error naming the file and every later write fails with it
// until the store is opened again (reads go on; nothing acknowledged is
// lost). A store whose sync failed, before Compact or while it copies,
// is not compacted: Compact fails with that permanent error.
//
// The store keeps its lock on the new file; a process that was waiting
// for the old file's lock gets the old, unlinked file: do not open a store
// from two processes. Compact is serialized with itself and with
// [Store.Salvage].
func (s *Store) Compact(ctx context.Context) (CompactStats, error) {
	const op = "compact"
	var st CompactStats
	fail := func(err error) (CompactStats, error) {
		if fe := (*fileError)(nil); !errors.As(err, &fe) { // a fileError names the file
			err = fmt.Errorf("%s: %w", s.path, err)
		}
		return st, &durability.StoreError{Op: op, Err: err}
	}
	if err := s.lockCompact(ctx); err != nil {
		return fail(err)
	}
	defer s.unlockCompact()
	if s.db.IsReadOnly() {
		return st, &durability.StoreError{Op: op, Err: fileFailure(s.path, bolterrors.ErrDatabaseReadOnly, nil)}
	}
	if err := s.writable(); err != nil { // it would rewrite the file from what the mapping shows
		return fail(err)
	}
	if err := s.inCommitter(ctx, func() error {
		if err := s.checkpoint(); err != nil {
			return err
		}
		s.viewMu.RLock()
		defer s.viewMu.RUnlock()
		for _, name := range slices.Sorted(maps.Keys(s.quarantine)) {
			if s.quarantine[name].pages != nil {
				// Its pages cannot be copied: what is intact of them is
				// kept by Salvage.
				return fmt.Errorf("the pages of actor %s are damaged (%w): Salvage it before compacting", quote.Name(name, "actor name"), s.quarantine[name].err)
			}
		}
		s.compacting = true
		return nil
	}); err != nil {
		return fail(err)
	}
	resume := func() {
		_ = s.inCommitter(context.Background(), func() error { s.compacting = false; return nil })
	}
	if fi, err := os.Stat(s.path); err == nil {
		st.Before = fi.Size()
	}
	tmp := fmt.Sprintf("%s.compact-%d", s.path, time.Now().UnixNano())
	var dstFile *os.File // the descriptor bbolt writes dst through
	dst, err := bolt.Open(tmp, DefaultFileMode, &bolt.Options{NoSync: s.noSync, FreelistType: bolt.FreelistMapType, Timeout: time.Second,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			f, err := s.openFile(name, flag, mode)
			dstFile = f
			return f, err
		}})
	if err != nil {
		resume()
		return fail(err)
	}
	cleanup := func() {
		dst.Close()
		os.Remove(tmp)
	}
	// The buckets do not change while checkpoints wait; the log does, and
	// is copied whole at the switch.
	s.viewMu.RLock()
	err = guard(s.path, "copying the file", boltInfo(s.db), func() error { return compactCopy(ctx, dst, s.db, compactTxSize) })
	s.viewMu.RUnlock()
	if err != nil {
		cleanup()
		resume()
		return fail(err)
	}
	ran := false      // whether the last step ran (it lets checkpoints go on)
	switched := false // whether the store uses the copy, renamed over its file
	err = s.inCommitter(ctx, func() error {
		start := time.Now()
		defer func() { st.Blocked = time.Since(start) }()
		ran = true
		s.compacting = false
		if err := s.writable(); err != nil { // a commit's sync failed meanwhile
			return err
		}
		s.viewMu.Lock()
		defer s.viewMu.Unlock()
		err := s.viewTx("copying the log", func(tx *bolt.Tx) error {
			return dst.Update(func(dtx *bolt.Tx) error {
				if err := dtx.DeleteBucket(walBucket); err != nil {
					return err
				}
				dw, err := dtx.CreateBucket(walBucket)
				if err != nil {
					return err
				}
				dw.FillPercent = 1
				wal := tx.Bucket(walBucket)
				if err := copyBucket(dw, wal); err != nil {
					return err
				}
				return dw.SetSequence(wal.Sequence())
			})
		})
		if err == nil && !s.noSync {
			err = dst.Sync()
		}
		if err == nil {
			err = os.Rename(tmp, s.path)
		}
		if err != nil {
			return err
		}
		// The copy is the file at the store's path now: the store uses it
		// whatever follows, never again the old file, which is unlinked.
		old := s.db
		s.db, s.file = dst, dstFile
		switched = true
		var dirErr error
		if !s.noSync {
			if err := syncDir(s.openFile, filepath.Dir(s.path)); err != nil {
				// The rename may not survive a crash, and with it what
				// the new file would take: take nothing more.
				dirErr = s.failWrites(dirSyncFailedWhy, fmt.Errorf("syncing the folder: %w", err))
			}
		}
		return errors.Join(dirErr, guard(s.path, "closing the old file", nil, old.Close))
	})
	if err != nil {
		if !ran { // ctx done, or the store closed, before it was handed over
			resume()
		}
		if !switched {
			cleanup()
		}
		return fail(err)
	}
	if fi, err := os.Stat(s.path); err == nil {
		st.After = fi.Size()
	}
	s.log.Info("boltstore compacted", "path", s.path, "before", st.Before, "after", st.After, "blocked", st.Blocked)
	return st, nil
}

// compactCopying, when set (by tests), is called by compactCopy once the
// transaction it copies from has begun; compactCommitted after each of
// the transactions it writes the copy in but the last.
var compactCopying, compactCommitted func()

// compactCopy copies the buckets of src into dst, as bolt.Compact does, in
// transactions of about txMaxSize bytes, but for the buckets Salvage set
// aside (see [Store.setAside]), which it drops: their pages are damaged;
// a copy of format "6" is then of format "5". It stops, with ctx's error,
// at the end of a transaction when ctx is done.
func compactCopy(ctx context.Context, dst, src *bolt.DB, txMaxSize int64) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a committed tx: ErrTxClosed
	size := int64(0)
	bucketAt := func(keys [][]byte) *bolt.Bucket {
		b := tx.Bucket(keys[0])
		for _, k := range keys[1:] {
			b = b.Bucket(k)
		}
		return b
	}
	var copyInto func(keys [][]byte, sb *bolt.Bucket) error
	copyInto = func(keys [][]byte, sb *bolt.Bucket) error {
		return sb.ForEach(func(k, v []byte) error {
			sz := int64(len(k) + len(v))
			if size+sz > txMaxSize {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := tx.Commit(); err != nil {
					return err
				}
				if compactCommitted != nil {
					compactCommitted()
				}
				if tx, err = dst.Begin(true); err != nil {
					return err
				}
				size = 0
			}
			size += sz
			db := bucketAt(keys)
			db.FillPercent = 1
			if v != nil {
				return db.Put(k, v)
			}
			child := sb.Bucket(k)
			nb, err := db.CreateBucket(k)
			if err != nil {
				return err
			}
			if err := nb.SetSequence(child.Sequence()); err != nil {
				return err
			}
			return copyInto(append(slices.Clone(keys), k), child)
		})
	}
	err = src.View(func(stx *bolt.Tx) error {
		if compactCopying != nil {
			compactCopying()
		}
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if bytes.Equal(name, setAsideBucket) {
				return nil
			}
			nb, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			if err := nb.SetSequence(b.Sequence()); err != nil {
				return err
			}
			return copyInto([][]byte{name}, b)
		})
	})
	if err != nil {
		return err
	}
	// Without the set-aside buckets, the copy is of format 5 again.
	if meta := tx.Bucket(metaBucket); meta != nil && string(meta.Get(formatKey)) == formatVersionSetAside {
		if err := meta.Put(formatKey, []byte(formatVersion)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// copyBucket copies src's keys into dst, nested buckets (the log's big
// values, see [putLogValue]) included.
func copyBucket(dst, src *bolt.Bucket) error {
	return src.ForEach(func(k, v []byte) error {
		if v != nil {
			return dst.Put(k, v)
		}
		sb := src.Bucket(k)
		if sb == nil {
			return fmt.Errorf("key %x is neither a value nor a nested bucket", k)
		}
		db, err := dst.CreateBucket(k)
		if err != nil {
			return err
		}
		return copyBucket(db, sb)
	})
}

// lockCompact waits for no Compact or Salvage to be under way, and
// returns ctx's error if ctx is done first; unlockCompact ends the wait
// of the next.
func (s *Store) lockCompact(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.compactMu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) unlockCompact() { <-s.compactMu }
