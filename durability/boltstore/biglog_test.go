package boltstore

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// bigLogFile writes a small event of actor "a", a 1 MiB event of actor
// "big", then small events 1 to 6 of "a", crashes the store so that all
// of it is only in the log, and returns the file's path, the big value
// and the log key of its entry. Each small commit after the big one must
// allocate a few pages, not rewrite the big value's.
func bigLogFile(t *testing.T) (string, []byte, uint64) {
	t.Helper()
	ctx := t.Context()
	s, path := openTemp(t, &Options{NoSync: true})
	if err := s.PersistEvent(ctx, "a", 0, []byte("small")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	if err := s.PersistEvent(ctx, "big", 0, big); err != nil {
		t.Fatal(err)
	}
	seq := s.nextSeq - 1
	for i := range uint64(6) {
		before := s.db.Stats().TxStats
		if err := s.PersistEvent(ctx, "a", i+1, bytes.Repeat([]byte{'s'}, 100)); err != nil {
			t.Fatal(err)
		}
		after := s.db.Stats().TxStats
		if alloc := after.GetPageAlloc() - before.GetPageAlloc(); alloc > 64<<10 {
			t.Errorf("small commit %d after a 1 MiB one allocated %d bytes of pages: it rewrote the big value", i+1, alloc)
		}
	}
	crash(t, s)
	return path, big, seq
}

// checkBigLog checks that the store at path holds what bigLogFile wrote.
func checkBigLog(t *testing.T, s *Store, big []byte) {
	t.Helper()
	var got []byte
	if err := s.GetEvents(t.Context(), "big", 0, 0, func(_ uint64, d []byte) error { got = bytes.Clone(d); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Errorf("big event read back: %d bytes, want the %d written", len(got), len(big))
	}
	n := 0
	if err := s.GetEvents(t.Context(), "a", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Errorf("actor a: %d events, want 7", n)
	}
}

// TestLog_BigValue checks that a 1 MiB log value sits in a nested bucket
// of its own, which the small commits after it do not rewrite, and that
// replay, Verify, Compact and the checkpoint read it back whole.
func TestLog_BigValue(t *testing.T) {
	path, big, seq := bigLogFile(t)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		wal := tx.Bucket(walBucket)
		if v := wal.Get(indexKey(seq)); v != nil {
			t.Errorf("big log entry %d: an inline value of %d bytes, want a nested bucket", seq, len(v))
		}
		if b := wal.Bucket(indexKey(seq)); b == nil || len(b.Get(indexKey(seq))) < len(big) {
			t.Errorf("big log entry %d: its nested bucket does not hold it", seq)
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Verify(path, nil)
	if err != nil || len(r.Problems) > 0 || r.Unreadable != nil || r.LogEntries != 8 {
		t.Fatalf("Verify = %+v, %v; want 8 intact log entries", r, err)
	}

	s, err := Open(path, &Options{NoSync: true, CheckpointOps: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	checkBigLog(t, s, big)
	// In the log of a running store, copied by Compact.
	if err := s.PersistEvent(t.Context(), "big", 1, big); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	s, err = Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := s.GetEvents(t.Context(), "big", 1, 2, func(_ uint64, d []byte) error { got = bytes.Clone(d); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Errorf("big event 1 after Compact and a crash: %d bytes, want %d", len(got), len(big))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLog_BigValueCheckpointedPiecewise checkpoints a log holding big
// values a piece per commit: the checkpoint's end deletes their nested
// buckets with the entries it moved.
func TestLog_BigValueCheckpointedPiecewise(t *testing.T) {
	ctx := t.Context()
	s, path := openTemp(t, &Options{NoSync: true, CheckpointOps: 2})
	big := bytes.Repeat([]byte("b"), 100<<10)
	for i := range uint64(20) {
		if err := s.PersistEvent(ctx, "big", i, big); err != nil {
			t.Fatal(err)
		}
	}
	var nested int
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(walBucket).ForEach(func(_, v []byte) error {
			if v == nil {
				nested++
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if s.logStart == 0 || nested > 4 {
		t.Errorf("after 20 big commits with a checkpoint every 2 writes: log start %d, %d nested buckets left; want the checkpointed ones deleted", s.logStart, nested)
	}
	crash(t, s)
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	if err := s.GetEvents(ctx, "big", 0, 0, func(_ uint64, d []byte) error {
		if !bytes.Equal(d, big) {
			t.Errorf("event %d: %d bytes, want the %d written", n, len(d), len(big))
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Errorf("%d events, want 20", n)
	}
}

// TestLog_BigValueDamaged damages the nested bucket of a big log value:
// its record's data (the actor alone is quarantined), and the bucket's
// shape (Open refuses the file naming the log entry, Verify reports it).
func TestLog_BigValueDamaged(t *testing.T) {
	t.Run("RecordData", func(t *testing.T) {
		path, _, _ := bigLogFile(t)
		damageRecord(t, path, "big", durability.RecordEvent, 0, 1000, true)
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var de *durability.DamageError
		if err := s.GetEvents(t.Context(), "big", 0, 0, func(uint64, []byte) error { return nil }); !errors.As(err, &de) {
			t.Errorf("GetEvents(big) after its data was damaged = %v, want a *durability.DamageError", err)
		}
		n := 0
		if err := s.GetEvents(t.Context(), "a", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != 7 {
			t.Errorf("GetEvents(a) = %d events, %v; want 7", n, err)
		}
	})
	for _, tc := range []struct {
		name   string
		damage func(b *bolt.Bucket, k []byte) error
	}{
		{"ExtraKey", func(b *bolt.Bucket, k []byte) error { return b.Put([]byte("extra"), []byte("x")) }},
		{"WrongKey", func(b *bolt.Bucket, k []byte) error {
			v := bytes.Clone(b.Get(k))
			if err := b.Delete(k); err != nil {
				return err
			}
			return b.Put(indexKey(decodeIndex(k)+1), v)
		}},
		{"Empty", func(b *bolt.Bucket, k []byte) error { return b.Delete(k) }},
		{"NestedBucket", func(b *bolt.Bucket, k []byte) error {
			if err := b.Delete(k); err != nil {
				return err
			}
			_, err := b.CreateBucket(k)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _, seq := bigLogFile(t)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error { return tc.damage(tx.Bucket(walBucket).Bucket(indexKey(seq)), indexKey(seq)) })
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			var de *durability.DamageError
			s, err := Open(path, &Options{NoSync: true})
			if err == nil {
				s.Close()
			}
			if !errors.As(err, &de) || de.What != durability.RecordLog.String() || !de.HasIndex || de.Index != seq {
				t.Errorf("Open = %v, want a *durability.DamageError naming log entry %d", err, seq)
			}
			r, err := Verify(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range r.Problems {
				found = found || errors.As(p, &de) && de.HasIndex && de.Index == seq
			}
			if !found || r.LogEntries != 7 {
				t.Errorf("Verify: %d intact log entries, problems %v; want 7 and one naming log entry %d", r.LogEntries, r.Problems, seq)
			}
		})
	}
}

// TestOpen_FormatV4 opens a version 4 file left with a log by a crash:
// read-only, it is read as it is; read-write, its log is replayed and the
// file marked version 5. A nested bucket in a version 4 log is damage.
func TestOpen_FormatV4(t *testing.T) {
	ctx := t.Context()
	for _, withNested := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "v4.db")
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		v := []byte("a0")
		if withNested {
			v = bytes.Repeat([]byte("n"), 2*bigLogValue)
		}
		if err := s.PersistEvent(ctx, "a", 0, v); err != nil {
			t.Fatal(err)
		}
		crash(t, s)
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(formatKey, []byte(formatVersionV4)) }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if withNested {
			var de *durability.DamageError
			s, err := Open(path, &Options{NoSync: true})
			if err == nil {
				s.Close()
			}
			if !errors.As(err, &de) {
				t.Errorf("Open(version 4 with a nested bucket in its log) = %v, want a *durability.DamageError", err)
			}
			continue
		}
		for _, readOnly := range []bool{true, false} {
			s, err := Open(path, &Options{NoSync: true, ReadOnly: readOnly})
			if err != nil {
				t.Fatalf("Open(version 4, read-only %v): %v", readOnly, err)
			}
			var got []byte
			if err := s.GetEvents(ctx, "a", 0, 0, func(_ uint64, d []byte) error { got = bytes.Clone(d); return nil }); err != nil || string(got) != "a0" {
				t.Errorf("read-only %v: event 0 = %q, %v; want \"a0\"", readOnly, got, err)
			}
			var format string
			s.db.View(func(tx *bolt.Tx) error { format = string(tx.Bucket(metaBucket).Get(formatKey)); return nil })
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: formatVersionV4, false: formatVersion}[readOnly]; format != want {
				t.Errorf("read-only %v: format after Open = %q, want %q", readOnly, format, want)
			}
		}
	}
}

// TestLog_EntryCutAtARecordEnd cuts a log entry of three records after
// its first (its length damaged in the leaf, or its big value's), and
// damages another's checksum alone: each record still checks, but the
// entry's checksum does not. Open refuses the file naming the entry
// rather than drop the records after the cut unseen; Verify reports it.
func TestLog_EntryCutAtARecordEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		cut  bool
	}{
		{"Cut", 10, true},
		{"CutBig", bigLogValue, true},
		{"Checksum", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTemp(t, &Options{NoSync: true})
			batch := [][]byte{bytes.Repeat([]byte("a"), tc.size), []byte("b"), []byte("c")}
			if err := s.PersistEvents(t.Context(), "x", 0, batch); err != nil {
				t.Fatal(err)
			}
			seq := s.nextSeq - 1
			crash(t, s)
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b, k := tx.Bucket(walBucket), indexKey(seq)
				if nb := b.Bucket(k); nb != nil {
					b = nb
				}
				v := bytes.Clone(b.Get(k))
				if !tc.cut {
					v[0] ^= 0xff
					return b.Put(k, v)
				}
				frame, _, err := nextFrame(v[crcSize:])
				if err != nil {
					return err
				}
				return b.Put(k, v[:crcSize+len(frame)])
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			var de *durability.DamageError
			s, err = Open(path, &Options{NoSync: true})
			if err == nil {
				s.Close()
			}
			if !errors.As(err, &de) || !de.HasIndex || de.Index != seq {
				t.Errorf("Open = %v, want a *durability.DamageError naming log entry %d", err, seq)
			}
			r, err := Verify(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) != 1 || !errors.As(r.Problems[0], &de) || de.Index != seq {
				t.Errorf("Verify problems = %v, want one naming log entry %d", r.Problems, seq)
			}
		})
	}
}
