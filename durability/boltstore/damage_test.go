package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/durabilitytest"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
)

// storedBytes returns, read with bbolt from the file at path, the stored
// bytes of name's record of kind at index and where its data starts in
// them: its bucket value, or (fromLog) its data in the last log value that
// holds it.
func storedBytes(t *testing.T, path, name string, kind durability.RecordKind, index uint64, fromLog bool) ([]byte, int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stored []byte
	skip := 0
	err = db.View(func(tx *bolt.Tx) error {
		if !fromLog {
			which := eventsBucket
			if kind == durability.RecordSnapshot {
				which = snapshotsBucket
			}
			if b := sub(tx, name, which); b != nil {
				stored, skip = bytes.Clone(b.Get(indexKey(index))), crcSize
			}
			return nil
		}
		want := putEvent
		if kind == durability.RecordSnapshot {
			want = putSnapshot
		}
		wal := tx.Bucket(walBucket)
		return wal.ForEach(func(k, v []byte) error {
			if v == nil { // a big value, in its nested bucket
				v = wal.Bucket(k).Get(k)
			}
			// Read past a record's damaged data: it is what is looked for.
			return decodeFramesWith(v[crcSize:], withSums, func(r record, _ error) error {
				if r.kind == want && r.name == name && r.index == index {
					stored, skip = bytes.Clone(r.data), 0
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return stored, skip
}

// damageRecord flips the byte at offset of the data of name's record of
// kind at index in the file at path. It finds the stored bytes in the file
// (bbolt hands out copies of values in small inline buckets, so their
// address says nothing) and, as stale copies may linger in free pages,
// keeps the flip that bbolt then reads back.
func damageRecord(t *testing.T, path, name string, kind durability.RecordKind, index uint64, offset int, fromLog bool) {
	t.Helper()
	stored, skip := storedBytes(t, path, name, kind, index, fromLog)
	if len(stored) <= skip+offset {
		t.Fatalf("%s %d of %q: %d stored bytes, cannot damage data byte %d", kind, index, name, len(stored), offset)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for from := 0; ; {
		i := bytes.Index(file[from:], stored)
		if i < 0 {
			t.Fatalf("%s %d of %q: no copy in the file is the one bbolt reads", kind, index, name)
		}
		off := int64(from + i + skip + offset)
		flipByte(t, path, off)
		if now, _ := storedBytes(t, path, name, kind, index, fromLog); !bytes.Equal(now, stored) {
			return
		}
		flipByte(t, path, off) // a stale copy: undo
		from += i + 1
	}
}

// flipByte flips bits of the byte at off in the file at path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// damageInFile is the durabilitytest.Damage of a bbolt store: it stops the
// store (closing it, or crashing it so that the record is only in the
// log), flips the byte of the record's data in the file and opens it again.
func damageInFile(crashed bool) durabilitytest.Damage {
	return func(t *testing.T, ds durability.Store, name string, kind durability.RecordKind, index uint64, offset int) (durability.Store, error) {
		s := ds.(*Store)
		if crashed {
			crash(t, s)
		} else if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		damageRecord(t, s.path, name, kind, index, offset, crashed)
		s2, err := Open(s.path, &Options{NoSync: true})
		if err != nil {
			return nil, err
		}
		return s2, nil
	}
}

// TestDamagedValues flips one byte inside stored values in the file, in
// the buckets (a clean file) and in the log (a file left by a killed
// process): every read of a damaged record fails naming it, every other
// read returns what was written; a damaged log refuses to open, naming the
// log entry.
func TestDamagedValues(t *testing.T) {
	open := func(t *testing.T) durability.Store {
		s, err := Open(filepath.Join(t.TempDir(), "store.db"), &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("Buckets", func(t *testing.T) { durabilitytest.RunDamagedValues(t, 25, open, damageInFile(false)) })
	t.Run("Log", func(t *testing.T) { durabilitytest.RunDamagedValues(t, 10, open, damageInFile(true)) })
}

// TestDamagedFiles runs the damaged-file cases on a clean file and on one
// left with an unreplayed log.
func TestDamagedFiles(t *testing.T) {
	open := func(path string) (durability.Store, error) {
		return Open(path, &Options{NoSync: true, OpenTimeout: 100 * time.Millisecond})
	}
	t.Run("Clean", func(t *testing.T) {
		durabilitytest.RunDamagedFiles(t, durabilitytest.FileStore{Open: open}, 40)
	})
	t.Run("UnreplayedLog", func(t *testing.T) {
		durabilitytest.RunDamagedFiles(t, durabilitytest.FileStore{Open: open, Crash: func(t *testing.T, s durability.Store) { crash(t, s.(*Store)) }}, 40)
	})
}

// TestQuarantine_DamagedLogRecord damages the data of one actor's last
// event in the log of a file left by a crash: Open takes the file and
// quarantines that actor alone (its reads and writes fail naming the
// record, the others read back whole), across a reopen too; Verify names
// the record and its actor; Salvage releases the actor with its snapshot
// and the events before the lost one.
func TestQuarantine_DamagedLogRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	d := durabilitytest.NewDataset(3, 5, 8)
	d.Tail = 2
	d.Write(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	d.Write(t, s, 1)
	crash(t, s)
	se := d.Sessions[1]
	last := se.Snapshot.Index + uint64(len(se.Events)) - 1
	damageRecord(t, path, se.Name, durability.RecordEvent, last, 0, true)

	for open := range 2 { // the quarantine survives a reopen
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			t.Fatalf("Open %d of a file with one actor's log record damaged: %v", open, err)
		}
		others := &durabilitytest.Dataset{Sessions: slices.Delete(slices.Clone(d.Sessions), 1, 2)}
		if o, problems := others.Check(t, s); o.Exact != 2*len(others.Sessions) {
			t.Errorf("open %d, the other sessions: %+v %v", open, o, problems)
		}
		_, _, err = s.GetSnapshot(t.Context(), se.Name)
		var de *durability.DamageError
		var serr *durability.StoreError
		if !errors.As(err, &de) || !errors.As(err, &serr) || serr.Name != se.Name || de.What != "event" || de.Index != last {
			t.Errorf("open %d, GetSnapshot of the quarantined actor: %v, want a StoreError naming it and the lost event %d", open, err, last)
		}
		if err := s.PersistEvent(t.Context(), se.Name, last+1, []byte("x")); !errors.Is(err, durability.ErrDamaged) {
			t.Errorf("open %d, a write to the quarantined actor: %v, want the damage", open, err)
		}
		if err := s.PersistEvent(t.Context(), fmt.Sprint("other-", open), 0, []byte("x")); err != nil {
			t.Errorf("open %d, a write to another actor: %v", open, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Verify(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var serr *durability.StoreError
	var de *durability.DamageError
	if r.Intact() || len(r.Problems) != 1 || !errors.As(r.Problems[0], &serr) || serr.Name != se.Name || !errors.As(r.Problems[0], &de) || de.Index != last {
		t.Errorf("Verify problems = %v, want the lost event %d of %q", r.Problems, last, se.Name)
	}

	s, err = Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Salvage(t.Context(), se.Name)
	// The lost event counts as dropped, as a damaged event in a bucket does.
	want := Salvaged{Snapshot: true, SnapshotIndex: se.Snapshot.Index, From: se.Snapshot.Index, Events: len(se.Events) - 1, Dropped: 1}
	if err != nil || got != want {
		t.Errorf("Salvage = %+v, %v; want %+v", got, err, want)
	}
	se.Events = se.Events[:len(se.Events)-1]
	d.Sessions[1] = se
	if o, problems := d.Check(t, s); o.Exact != 2*len(d.Sessions) {
		t.Errorf("after Salvage: %+v %v", o, problems)
	}
	if err := s.PersistEvent(t.Context(), se.Name, last, []byte("again")); err != nil {
		t.Errorf("a write after Salvage: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := Verify(path, nil); err != nil || !r.Intact() {
		t.Errorf("Verify after Salvage: %v %+v", err, r)
	}
}

// TestQuarantine_DamagedBucket damages the summary of an actor whose
// newer writes are in the log of a file left by a crash, so that the
// checkpoint at Open cannot apply them: Open quarantines that actor alone
// (before, it refused the whole store), and Salvage applies its intact
// writes and releases it.
func TestQuarantine_DamagedBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	d := durabilitytest.NewDataset(4, 4, 8)
	d.Write(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	se := d.Sessions[2]
	flipStored(t, path, func(tx *bolt.Tx) []byte { return actorBucket(tx, se.Name).Get(summaryKey) }, 10)
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	d.Write(t, s, 1) // into the log: the summary is read at the checkpoint
	crash(t, s)
	s, err = Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v, want the store open with one actor quarantined", err)
	}
	defer s.Close()
	others := &durabilitytest.Dataset{Sessions: slices.Delete(slices.Clone(d.Sessions), 2, 3)}
	if o, problems := others.Check(t, s); o.Exact != 2*len(others.Sessions) {
		t.Errorf("the other sessions: %+v %v", o, problems)
	}
	if _, _, err := s.GetSnapshot(t.Context(), se.Name); !errors.Is(err, durability.ErrDamaged) {
		t.Errorf("GetSnapshot of the damaged actor: %v, want the damage", err)
	}
	if _, err := s.Salvage(t.Context(), se.Name); err != nil {
		t.Fatal(err)
	}
	if o, problems := d.Check(t, s); o.Exact != 2*len(d.Sessions) {
		t.Errorf("after Salvage: %+v %v", o, problems)
	}
}

// flipStored flips the byte at offset of the value get returns, in the
// file at path, keeping the flip bbolt reads back (see damageRecord).
func flipStored(t *testing.T, path string, get func(*bolt.Tx) []byte, offset int) {
	t.Helper()
	read := func() []byte {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v []byte
		if err := db.View(func(tx *bolt.Tx) error { v = bytes.Clone(get(tx)); return nil }); err != nil {
			t.Fatal(err)
		}
		return v
	}
	stored := read()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for from := 0; ; {
		i := bytes.Index(file[from:], stored)
		if i < 0 {
			t.Fatal("no copy in the file is the one bbolt reads")
		}
		off := int64(from + i + offset)
		flipByte(t, path, off)
		if !bytes.Equal(read(), stored) {
			return
		}
		flipByte(t, path, off)
		from += i + 1
	}
}

// TestSalvage_Conformance runs the Salvager conformance case on an event
// damaged in the buckets (a clean file) and in the log (a file left by a
// crash: the actor is quarantined, and Salvage releases it).
func TestSalvage_Conformance(t *testing.T) {
	open := func(t *testing.T) durability.Store {
		s, err := Open(filepath.Join(t.TempDir(), "store.db"), &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("Buckets", func(t *testing.T) { durabilitytest.RunSalvage(t, open, damageInFile(false)) })
	t.Run("Log", func(t *testing.T) { durabilitytest.RunSalvage(t, open, damageInFile(true)) })
}

// TestSalvage damages an event after the snapshot of one actor: its
// recovery fails until Salvage is asked for, which keeps the snapshot and
// the events before the damaged one; the other actors are untouched.
func TestSalvage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	d := durabilitytest.NewDataset(5, 3, 10) // snapshot at 5, events 5..9
	d.Write(t, s, 0)
	d.Write(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	se := d.Sessions[1]
	damageRecord(t, path, se.Name, durability.RecordEvent, se.Snapshot.Index+2, 3, false)
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if o, _ := d.Check(t, s); o.Damaged != 1 || o.Exact != 5 {
		t.Fatalf("before Salvage: %+v, want one damaged read", o)
	}
	got, err := s.Salvage(t.Context(), se.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := Salvaged{Snapshot: true, SnapshotIndex: 5, Events: 2, From: 5, Dropped: 3}
	if got != want {
		t.Errorf("Salvage = %+v, want %+v", got, want)
	}
	// The salvaged session recovers: its snapshot and its first two events.
	se.Events = se.Events[:2]
	d.Sessions[1] = se
	if o, problems := d.Check(t, s); o.Exact != 6 {
		t.Errorf("after Salvage: %+v %v", o, problems)
	}
	// It takes new events where it left off, and survives a reopen.
	if err := s.PersistEvent(t.Context(), se.Name, 7, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(path, nil)
	if err != nil || !r.Intact() {
		t.Fatalf("Verify after Salvage: %v %+v", err, r)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.GetEvents(t.Context(), se.Name, 5, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != 3 {
		t.Errorf("after reopen: %d events, %v; want 3", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVerify_HeldByARunningStore verifies a file that an open store holds
// and commits to meanwhile: Verify reads a consistent copy and says so;
// a copy taken while commits run is never reported damaged (or, if the
// store commits during every copy, Verify says it cannot take one).
func TestVerify_HeldByARunningStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, &Options{CheckpointOps: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := durabilitytest.NewDataset(9, 20, 8)
	d.Write(t, s, 0)
	r, err := Verify(path, &Options{OpenTimeout: 50 * time.Millisecond})
	if err != nil || !r.Intact() || !strings.Contains(r.Copy, "held by another open store of this process") {
		t.Fatalf("Verify of an idle held file: %v, %+v", err, r)
	}
	seen := map[string]bool{}
	for _, a := range r.Actors {
		seen[a.Name] = true
	}
	for _, name := range r.LogActors {
		seen[name] = true
	}
	if len(seen) != len(d.Sessions) {
		t.Errorf("Verify of an idle held file saw %d actors in the buckets and the log, want %d", len(seen), len(d.Sessions))
	}
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := s.PersistEvent(context.Background(), fmt.Sprint("busy-", i%7), i, bytes.Repeat([]byte{'b'}, 300)); err != nil {
				done <- err
				return
			}
		}
	}()
	copies := 0
	for range 5 {
		r, err := Verify(path, &Options{OpenTimeout: 10 * time.Millisecond})
		if err == nil {
			copies++
		}
		switch {
		case err != nil && !strings.Contains(err.Error(), "no consistent copy"):
			t.Errorf("Verify while commits run: %v", err)
		case err == nil && (!r.Intact() || r.Copy == ""):
			t.Errorf("Verify while commits run: %+v, want an intact copy", r)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 5 verifies while commits ran got a consistent copy", copies)
}

// TestDamagedValues_LongRead damages events of an actor with more events
// than a read page, which a read checks with one Summer over all pages
// (after its first summerAfter events): the read fails naming the first
// damaged event in index order, before, at and after the Summer's start
// and at both ends of a page, never returns a damaged event, and an
// undamaged read returns every event as written.
func TestDamagedValues_LongRead(t *testing.T) {
	const events = readPageEvents + 5
	base := filepath.Join(t.TempDir(), "base.db")
	s, err := Open(base, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	event := func(i uint64) []byte {
		return fmt.Appendf(nil, "event %06d %s", i, bytes.Repeat([]byte{byte(i)}, 80+int(i%7)))
	}
	for i := range uint64(events) {
		if err := s.PersistEvent(t.Context(), "router", i, event(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, damaged := range [][]uint64{nil, {3}, {summerAfter}, {summerAfter + 1}, {summerAfter + 2}, {summerAfter + 1, summerAfter + 2},
		{summerAfter + 2, summerAfter + 3}, {500, events - 3}, {readPageEvents - 1}, {events - 3}, {events - 2}, {events - 1}} {
		t.Run(fmt.Sprint(damaged), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			if err := os.WriteFile(path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, i := range damaged {
				damageRecord(t, path, "router", durability.RecordEvent, i, int(i%50), false)
			}
			s, err := Open(path, &Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			next := uint64(0)
			err = s.GetEvents(t.Context(), "router", 0, 0, func(i uint64, data []byte) error {
				if i != next || !bytes.Equal(data, event(i)) {
					return fmt.Errorf("event %d: %q, want event %d: %q", i, data, next, event(next))
				}
				next++
				return nil
			})
			if damaged == nil {
				if err != nil || next != events {
					t.Fatalf("read %d of %d events: %v", next, events, err)
				}
				return
			}
			checkDamageAt(t, err, damaged[0])
			if next > damaged[0] {
				t.Errorf("read %d events, the damaged event %d among them", next, damaged[0])
			}
		})
	}
}

// checkDamageAt checks that err reports damage to event index of "router".
func checkDamageAt(t *testing.T, err error, index uint64) {
	t.Helper()
	var de *durability.DamageError
	if !errors.As(err, &de) || !de.HasIndex || de.Index != index || de.What != "event" || de.Offset < 0 {
		t.Fatalf("read: %v, want damage to event %d with its offset in the file", err, index)
	}
}

// TestOpen_FreelistDamaged damages a clean file's freelist so that it
// lists a page in use (the root, the freelist page itself) or a page
// twice: bbolt would hand the page out and a commit would overwrite live
// data. A page the tree uses makes a writable Open refuse the file naming
// the freelist (which of the two is damaged cannot be told); damage of
// the freelist alone makes it rebuild the freelist from the tree, after
// which bbolt's check of the file passes.
func TestOpen_FreelistDamaged(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		id           func(m meta, second uint64) uint64
	}{
		{"Root", "which is in use", func(m meta, _ uint64) uint64 { return m.root }},
		{"Itself", "", func(m meta, _ uint64) uint64 { return m.freelist }},
		{"Twice", "", func(_ meta, second uint64) uint64 { return second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, path := openTemp(t, &Options{NoSync: true})
			for i := range uint64(20) {
				if err := s.PersistEvent(ctx, "a", i, bytes.Repeat([]byte("x"), 3000)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := validateFile(t.Context(), f, path, false)
			if err != nil {
				t.Fatal(err)
			}
			fl := int64(m.freelist) * int64(m.pageSize)
			hdr := make([]byte, pageHeaderSize+16)
			if _, err := f.ReadAt(hdr, fl); err != nil {
				t.Fatal(err)
			}
			if count := binary.LittleEndian.Uint16(hdr[10:]); count < 2 || count == 0xFFFF {
				t.Fatalf("freelist page %d lists %d pages: want a few free pages to damage", m.freelist, count)
			}
			id := tc.id(m, binary.LittleEndian.Uint64(hdr[pageHeaderSize+8:]))
			if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, id), fl+pageHeaderSize); err != nil {
				t.Fatal(err)
			}
			f.Close()
			s, err = Open(path, &Options{NoSync: true})
			if err == nil {
				s.Close()
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Open(freelist listing page %d): %v, want the freelist rebuilt", id, err)
				}
				boltCheck(t, path)
				return
			}
			var de *durability.DamageError
			if !errors.As(err, &de) || !strings.Contains(de.Reason, tc.reason) {
				t.Errorf("Open(freelist listing page %d) = %v, want a *durability.DamageError saying %q", id, err, tc.reason)
			}
		})
	}
}

// TestSalvage_LostPutAfterADelete: a put lost in the log counts among the
// records Salvage drops when it was written after a delete that covers
// its index (event 3 written again after the snapshot at 5 compacted the
// events below it), as the same put damaged in its bucket does, and as
// the other stores count it; a put that a later delete covers does not
// (event 3 written again before that snapshot: the delete dropped it, not
// Salvage). Either holds across a reopen before Salvage, which writes the
// quarantined actor's log again.
func TestSalvage_LostPutAfterADelete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		againAt uint64 // event 3 is written again before event againAt
		dropped int
	}{
		{"PutAfterTheDelete", 10, 1},
		{"DeleteAfterThePut", 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			salvageLostEvent3(t, tc.againAt, nil, damageEvent3, tc.dropped)
		})
	}
}

// TestSalvage_LostPutBeforeAndAfterADelete: event 3 is written, then
// covered by the snapshot at 5 that compacts the events below it, then
// written again, and both its writes are lost in the log. The first was
// deleted by the snapshot, not by Salvage; the second was written after
// it, and Salvage drops it: one record dropped, before a reopen and
// after it.
func TestSalvage_LostPutBeforeAndAfterADelete(t *testing.T) {
	salvageLostEvent3(t, 10, nil, func(t *testing.T, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for from := 0; ; n++ {
			i := bytes.Index(b[from:], []byte("event 3"))
			if i < 0 {
				break
			}
			flipByte(t, path, int64(from+i+2))
			from += i + 1
		}
		if n < 2 {
			t.Fatalf("%d copies of event 3 in the file, want both writes", n)
		}
	}, 1)
}

// TestSalvage_LostPutThenDeletedAgain: event 3 is written again after the
// snapshot at 5 compacted the events below it, its write is lost in the
// log, and a delete through 4 then covers it again, leaving the mark
// where the snapshot put it. That delete dropped it, not Salvage: no
// record dropped, before a reopen and after it.
func TestSalvage_LostPutThenDeletedAgain(t *testing.T) {
	salvageLostEvent3(t, 10, func(t *testing.T, s *Store) {
		if err := s.DeleteEvents(t.Context(), "a", 4); err != nil {
			t.Fatal(err)
		}
	}, damageEvent3, 0)
}

// salvageLostEvent3 writes events 0 to 9 of actor "a" with a snapshot at
// 5 (which compacts the events below it) before event 5, writes event 3
// again before event againAt (10: after event 9), then calls then (if
// not nil), leaves it all in the log by a crash, calls damage, and checks
// that Salvage, before a reopen and after it, keeps the snapshot and
// events 5 to 9 and counts dropped records.
func salvageLostEvent3(t *testing.T, againAt uint64, then func(*testing.T, *Store), damage func(*testing.T, string), dropped int) {
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%t", reopen), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			s, err := Open(path, &Options{NoSync: true, CheckpointOps: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			for i := range uint64(11) {
				if i == againAt {
					if err := s.PersistEvent(ctx, "a", 3, []byte("event 3 again")); err != nil {
						t.Fatal(err)
					}
				}
				if i == 5 {
					if err := s.PersistSnapshot(ctx, "a", 5, []byte("state at 5")); err != nil {
						t.Fatal(err)
					}
				}
				if i < 10 {
					if err := s.PersistEvent(ctx, "a", i, fmt.Appendf(nil, "event %d", i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if then != nil {
				then(t, s)
			}
			crash(t, s)
			damage(t, path)
			if s, err = Open(path, &Options{NoSync: true}); err != nil {
				t.Fatal(err)
			}
			if reopen {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, err = Open(path, &Options{NoSync: true}); err != nil {
					t.Fatal(err)
				}
			}
			defer s.Close()
			got, err := s.Salvage(ctx, "a")
			want := Salvaged{Snapshot: true, SnapshotIndex: 5, From: 5, Events: 5, Dropped: dropped}
			if err != nil || got != want {
				t.Errorf("Salvage = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

// damageEvent3 damages the write of event 3 of actor "a" that bbolt reads
// from the log of the store file at path.
func damageEvent3(t *testing.T, path string) {
	damageRecord(t, path, "a", durability.RecordEvent, 3, 2, true)
}

// TestQuarantine_LongNameLogged: the log lines that quarantine an actor
// and release it name it as errors do, escaped and clipped, however long
// the name and whatever bytes it holds: a name of 32 KiB of control bytes
// makes no line of 64 KiB.
func TestQuarantine_LongNameLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	name := "\x1b[31m" + strings.Repeat("\n\r", MaxNameLen/2-3)
	write := func(s *Store, i uint64) {
		if err := s.PersistEvent(t.Context(), name, i, fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	write(s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipStored(t, path, func(tx *bolt.Tx) []byte { return actorBucket(tx, name).Get(summaryKey) }, 10)
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	write(s, 1) // into the log: the summary is read at the checkpoint
	crash(t, s)
	var logged syncbuf.Buffer
	s, err = Open(path, &Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Open: %v, want the store open with the actor quarantined", err)
	}
	if _, err := s.Salvage(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("(actor name of %d bytes, clipped)", len(name))
	var quarantined, released bool
	for _, line := range strings.Split(logged.String(), "\n") {
		if len(line) > 4096 {
			t.Errorf("a log line of %d bytes: %.200q…", len(line), line)
		}
		quarantined = quarantined || strings.Contains(line, "actor quarantined") && strings.Contains(line, marker)
		released = released || strings.Contains(line, "released from quarantine") && strings.Contains(line, marker)
	}
	if !quarantined || !released {
		t.Errorf("no line that quarantines (%t) or releases (%t) the actor, naming it clipped with %q: %.600q", quarantined, released, marker, logged.String())
	}
}
