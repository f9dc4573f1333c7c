package durabilitytest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// Dataset is a seeded set of sessions for damage tests: each session has
// events persisted one by one and in batches, a snapshot that compacts the
// events below it, and events after it, all with seeded random data. It
// is written in two phases, so that a test can checkpoint (close) after
// the first and leave the second in a log (crash).
type Dataset struct {
	Sessions []Session
	// Tail, if positive, limits the second phase to the first Tail
	// sessions: the others are written whole in the first.
	Tail int
}

// Session is one actor's expected state in a [Dataset]: its newest
// snapshot and the events from the snapshot's index on.
type Session struct {
	Name     string
	Snapshot durability.Snapshot
	Events   [][]byte // at indexes Snapshot.Index, Snapshot.Index+1, ...
	first    [][]byte // the events below the snapshot (compacted away)
}

// NewDataset returns sessions sessions of events events each (at least 4),
// their data seeded by seed.
func NewDataset(seed uint64, sessions, events int) *Dataset {
	rng := rand.New(rand.NewPCG(seed, 0x5e55))
	events = max(events, 4)
	d := &Dataset{}
	payload := func(name, what string, i int) []byte {
		b := fmt.Appendf(nil, "%s %s %d ", name, what, i)
		for range rng.IntN(200) {
			b = append(b, byte(rng.Uint32()))
		}
		return b
	}
	for n := range sessions {
		name := fmt.Sprintf("session-%03d", n)
		snapAt := events / 2
		se := Session{Name: name, Snapshot: durability.Snapshot{Index: uint64(snapAt), Data: payload(name, "snapshot", snapAt)}}
		for i := range events {
			e := payload(name, "event", i)
			if i < snapAt {
				se.first = append(se.first, e)
			} else {
				se.Events = append(se.Events, e)
			}
		}
		d.Sessions = append(d.Sessions, se)
	}
	return d
}

// Write persists phase 0 (events below the snapshot, the snapshot, and
// all but the last two events) or phase 1 (the last two events, as one
// batch) of every session (see Tail).
func (d *Dataset) Write(t testing.TB, s durability.Store, phase int) {
	t.Helper()
	ctx := t.Context()
	for k, se := range d.Sessions {
		at := se.Snapshot.Index
		inTail := d.Tail <= 0 || k < d.Tail
		if phase == 1 && !inTail {
			continue
		}
		if phase == 1 {
			n := len(se.Events)
			if err := s.PersistEvents(ctx, se.Name, at+uint64(n-2), se.Events[n-2:]); err != nil {
				t.Fatalf("PersistEvents(%q): %v", se.Name, err)
			}
			continue
		}
		half := len(se.first) / 2
		for i, e := range se.first[:half] {
			if err := s.PersistEvent(ctx, se.Name, uint64(i), e); err != nil {
				t.Fatalf("PersistEvent(%q, %d): %v", se.Name, i, err)
			}
		}
		if err := s.PersistEvents(ctx, se.Name, uint64(half), se.first[half:]); err != nil {
			t.Fatalf("PersistEvents(%q): %v", se.Name, err)
		}
		if err := s.PersistSnapshot(ctx, se.Name, at, se.Snapshot.Data); err != nil {
			t.Fatalf("PersistSnapshot(%q): %v", se.Name, err)
		}
		rest := se.Events
		if inTail {
			rest = rest[:len(rest)-2]
		}
		for i, e := range rest {
			if err := s.PersistEvent(ctx, se.Name, at+uint64(i), e); err != nil {
				t.Fatalf("PersistEvent(%q, %d): %v", se.Name, at+uint64(i), err)
			}
		}
	}
}

// Outcome counts what reading a Dataset back gave.
type Outcome struct {
	Exact     int // reads that returned exactly what was written
	Damaged   int // reads that failed with an error wrapping durability.ErrDamaged
	Different int // reads that returned something else without an error: must stay 0
	Other     int // reads that failed with an error not saying the data is damaged
}

// Check reads every session of d from s (its snapshot, then its events
// from the snapshot's index on, as recovery does) and counts the outcomes.
// Each wrong result is described in problems (at most a few).
func (d *Dataset) Check(t testing.TB, s durability.Store) (o Outcome, problems []string) {
	t.Helper()
	ctx := t.Context()
	note := func(format string, args ...any) {
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	classify := func(name, what string, err error) {
		var se *durability.StoreError
		switch {
		case errors.Is(err, durability.ErrDamaged) && errors.As(err, &se) && se.Name == name:
			o.Damaged++
		default:
			o.Other++
			note("%s %s: error not reporting damage: %v", name, what, err)
		}
	}
	for _, se := range d.Sessions {
		snap, ok, err := s.GetSnapshot(ctx, se.Name)
		switch {
		case err != nil:
			classify(se.Name, "snapshot", err)
		case !ok || snap.Index != se.Snapshot.Index || !bytes.Equal(snap.Data, se.Snapshot.Data):
			o.Different++
			note("%s snapshot: got ok=%v index %d (%d bytes), want index %d (%d bytes)", se.Name, ok, snap.Index, len(snap.Data), se.Snapshot.Index, len(se.Snapshot.Data))
		default:
			o.Exact++
		}
		var got [][]byte
		var idx []uint64
		err = s.GetEvents(ctx, se.Name, se.Snapshot.Index, 0, func(i uint64, d []byte) error {
			idx, got = append(idx, i), append(got, d)
			return nil
		})
		if err != nil {
			classify(se.Name, "events", err)
			continue
		}
		same := len(got) == len(se.Events)
		for k := 0; same && k < len(got); k++ {
			same = idx[k] == se.Snapshot.Index+uint64(k) && bytes.Equal(got[k], se.Events[k])
		}
		if !same {
			o.Different++
			note("%s events: got %d events at %v, want %d from %d", se.Name, len(got), idx, len(se.Events), se.Snapshot.Index)
			continue
		}
		o.Exact++
	}
	return o, problems
}

// Damage damages one stored byte for [RunDamagedValues]: byte offset
// (0 <= offset < len(data)) of the data of name's record of kind at index,
// in the store's memory or its file, and returns the store to read back
// from: s itself, or s closed and opened again. A store that refuses to
// open again must say the data is damaged (an error wrapping
// durability.ErrDamaged); that counts as every read failing.
type Damage func(t *testing.T, s durability.Store, name string, kind durability.RecordKind, index uint64, offset int) (durability.Store, error)

// RunDamagedValues checks that a store detects damage inside stored
// values: for rounds seeded damages, it writes a [Dataset] to a fresh
// store from open, damages one byte of one record's data with damage, and
// reads every session back. Every read of the damaged record must fail
// with a *durability.StoreError naming the actor, wrapping a
// *durability.DamageError that names the record's kind and index; the
// actor's other read may fail the same way (a store may quarantine an
// actor with damaged data), never return different data; every read of
// the other actors must return exactly what was written.
func RunDamagedValues(t *testing.T, rounds int, open func(t *testing.T) durability.Store, damage Damage) {
	t.Helper()
	for round := range rounds {
		t.Run(fmt.Sprint("seed-", round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 0xda3a))
			d := NewDataset(uint64(round), 4, 8)
			s := open(t)
			d.Write(t, s, 0)
			d.Write(t, s, 1)
			se := d.Sessions[rng.IntN(len(d.Sessions))]
			kind, index, data := durability.RecordSnapshot, se.Snapshot.Index, se.Snapshot.Data
			if k := rng.IntN(len(se.Events) + 1); k < len(se.Events) {
				kind, index, data = durability.RecordEvent, se.Snapshot.Index+uint64(k), se.Events[k]
			}
			offset := rng.IntN(len(data))
			s2, err := damage(t, s, se.Name, kind, index, offset)
			if err != nil {
				if !errors.Is(err, durability.ErrDamaged) {
					t.Fatalf("store refused to open after damage to %s %s %d byte %d, without saying it is damaged: %v", se.Name, kind, index, offset, err)
				}
				return
			}
			defer s2.Close()
			// The damaged record alone.
			var readErr error
			if kind == durability.RecordSnapshot {
				_, _, readErr = s2.GetSnapshot(t.Context(), se.Name)
			} else {
				readErr = s2.GetEvents(t.Context(), se.Name, index, index+1, func(uint64, []byte) error {
					return errors.New("the damaged event was returned")
				})
			}
			checkDamage(t, readErr, se.Name, kind, index)
			// Everything: only the damaged actor's reads fail: the one that
			// includes the damaged record, or both when the store
			// quarantines the actor. The others return what was written.
			others := &Dataset{}
			for _, o := range d.Sessions {
				if o.Name != se.Name {
					others.Sessions = append(others.Sessions, o)
				}
			}
			if o, problems := others.Check(t, s2); o.Exact != 2*len(others.Sessions) {
				t.Errorf("after damaging %s %s %d byte %d, the other sessions: %+v %s", se.Name, kind, index, offset, o, strings.Join(problems, "; "))
			}
			if o, problems := (&Dataset{Sessions: []Session{se}}).Check(t, s2); o.Different+o.Other > 0 || o.Damaged == 0 {
				t.Errorf("after damaging %s %s %d byte %d, its session: %+v %s", se.Name, kind, index, offset, o, strings.Join(problems, "; "))
			}
		})
	}
	t.Run("NewestSnapshotDamaged", func(t *testing.T) { runNewestSnapshotDamaged(t, open, damage) })
}

// runNewestSnapshotDamaged is RunDamagedValues' case of a damaged newest
// snapshot beside an intact older one (a snapshot persisted below the
// newest keeps it): GetSnapshot must report the damage, not fall back to
// the older snapshot, whose state the actor left behind (replaying the
// events from its index would apply them to a stale state, and the
// events below the newest snapshot are compacted away).
func runNewestSnapshotDamaged(t *testing.T, open func(t *testing.T) durability.Store, damage Damage) {
	ctx := t.Context()
	s := open(t)
	name, newest, _ := twoSnapshots(t, s)
	s2, err := damage(t, s, name, durability.RecordSnapshot, 8, len(newest)/2)
	if err != nil {
		if !errors.Is(err, durability.ErrDamaged) {
			t.Fatalf("store refused to open after damage to snapshot 8 of %s, without saying it is damaged: %v", name, err)
		}
		return
	}
	defer s2.Close()
	snap, ok, err := s2.GetSnapshot(ctx, name)
	if err == nil {
		t.Fatalf("GetSnapshot with the newest snapshot (8) damaged = %v, index %d %q, want the damage reported", ok, snap.Index, snap.Data)
	}
	checkDamage(t, err, name, durability.RecordSnapshot, 8)
}

// twoSnapshots writes events 0 to 9 of an actor on s, a snapshot at 8
// (newest) and then one at 3 (older, persisted below the newest, so the
// newest keeps it and the events below 8 are compacted away), and
// returns the actor's name and both snapshots' data.
func twoSnapshots(t *testing.T, s durability.Store) (name string, newest []byte, older string) {
	t.Helper()
	name = "two-snapshots"
	for i := range uint64(10) {
		if err := s.PersistEvent(t.Context(), name, i, fmt.Appendf(nil, "%s event %d", name, i)); err != nil {
			t.Fatal(err)
		}
	}
	newest = []byte(name + " snapshot at 8, the newest state")
	older = name + " snapshot at 3, an older state"
	if err := s.PersistSnapshot(t.Context(), name, 8, newest); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistSnapshot(t.Context(), name, 3, []byte(older)); err != nil {
		t.Fatal(err)
	}
	return name, newest, older
}

// checkDamage checks that err reports the damaged record.
func checkDamage(t *testing.T, err error, name string, kind durability.RecordKind, index uint64) {
	t.Helper()
	var se *durability.StoreError
	var de *durability.DamageError
	switch {
	case err == nil:
		t.Errorf("reading damaged %s %d of %q: no error", kind, index, name)
	case !errors.As(err, &se) || se.Name != name:
		t.Errorf("reading damaged %s %d of %q: %v, want a StoreError naming the actor", kind, index, name, err)
	case !errors.As(err, &de) || !de.HasIndex || de.Index != index || de.What != kind.String() || de.Store == "":
		t.Errorf("reading damaged %s %d of %q: %v, want a DamageError naming the store, the %s and index %d", kind, index, name, err, kind, index)
	case !strings.Contains(err.Error(), "damaged"):
		t.Errorf("error %q does not say the record is damaged", err)
	}
}

// FileStore opens a store kept in one file, for [RunDamagedFiles].
type FileStore struct {
	// Open opens the store at path, creating it if nothing is there.
	Open func(path string) (durability.Store, error)
	// Crash stops s as a killed process would, leaving writes in the
	// file's log unreplayed; nil means the store has no such state and
	// Close is used.
	Crash func(t *testing.T, s durability.Store)
}

// RunDamagedFiles checks that a file store never panics or crashes on a
// damaged file and never returns data that differs from what was written:
// it writes a [Dataset] (with its second phase left unreplayed when
// fs.Crash is set), damages a copy of the file in seeded ways (truncated,
// zeroed pages, random bytes flipped, emptied to 0 bytes, replaced by
// bytes without a header) and opens and reads each. Opening must fail, or
// every read must return exactly what was written or fail with an error
// wrapping durability.ErrDamaged; an empty, headerless or truncated file
// must fail to open, and so must a file another store holds (with an
// error wrapping durability.ErrLocked that names the path).
func RunDamagedFiles(t *testing.T, fs FileStore, flips int) {
	t.Helper()
	dir := t.TempDir()
	d := NewDataset(1, 12, 10)
	clean := dir + "/clean.db"
	s, err := fs.Open(clean)
	if err != nil {
		t.Fatal(err)
	}
	d.Write(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = fs.Open(clean); err != nil {
		t.Fatal(err)
	}
	d.Write(t, s, 1)
	if fs.Crash != nil {
		fs.Crash(t, s)
	} else if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	try := func(t *testing.T, b []byte, mustFail bool) {
		t.Helper()
		n++
		path := fmt.Sprintf("%s/damaged-%d.db", dir, n)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		s, err := fs.Open(path)
		if err != nil {
			var se *durability.StoreError
			if !errors.As(err, &se) || err.Error() == "" {
				t.Errorf("Open of a damaged file: %v, want a *durability.StoreError", err)
			}
			return
		}
		defer s.Close()
		if mustFail {
			t.Errorf("Open of a damaged file (%d bytes) succeeded", len(b))
		}
		if o, problems := d.Check(t, s); o.Different+o.Other > 0 {
			t.Errorf("damaged file read back: %+v %s", o, strings.Join(problems, "; "))
		}
	}
	t.Run("Intact", func(t *testing.T) {
		s, err := fs.Open(clean)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if o, problems := d.Check(t, s); o.Exact != 2*len(d.Sessions) {
			t.Fatalf("intact file read back: %+v %s", o, strings.Join(problems, "; "))
		}
	})
	t.Run("ZeroBytes", func(t *testing.T) { try(t, nil, true) })
	t.Run("Headerless", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		junk := make([]byte, 64<<10)
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		try(t, junk, true)
		try(t, []byte("not a store\n"), true)
	})
	t.Run("Truncated", func(t *testing.T) {
		for _, size := range []int{1, 4096, 8192, len(orig) / 2, len(orig) - 4096, len(orig) - 1} {
			if size > 0 && size < len(orig) {
				// Only the sizes that cut into the pages in use must fail;
				// a file may end in pages not used yet.
				try(t, orig[:size], size <= 8192 || size%4096 != 0)
			}
		}
	})
	t.Run("ZeroedPage", func(t *testing.T) {
		const page = 4096
		for off := 0; off+page <= len(orig); off += page {
			b := bytes.Clone(orig)
			clear(b[off : off+page])
			try(t, b, false)
		}
		b := bytes.Clone(orig)
		clear(b[:2*page]) // both meta pages
		try(t, b, true)
	})
	t.Run("Flips", func(t *testing.T) {
		for seed := range uint64(flips) {
			rng := rand.New(rand.NewPCG(seed, 0xf11b))
			b := bytes.Clone(orig)
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
			try(t, b, false)
		}
	})
	t.Run("Locked", func(t *testing.T) {
		path := dir + "/locked.db"
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := fs.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = fs.Open(path)
		if !errors.Is(err, durability.ErrLocked) || !strings.Contains(fmt.Sprint(err), path) {
			t.Errorf("Open of a file another store holds: %v, want an error wrapping ErrLocked naming %s", err, path)
		}
	})
}

// RunSalvage checks a store's [durability.Salvager]: it writes a
// [Dataset] of three sessions (a snapshot at 5, events 5 to 9), damages
// one byte of one session's event 8 with damage, and checks that reading
// that session fails, that Salvage keeps its snapshot and events 5 to 7
// (the intact run before the damaged event) and drops what follows, 8
// and 9, counting both in Dropped, that every session then reads back
// (the salvaged one as kept), and that the salvaged session takes a new
// event 8. A last case damages an actor's newest snapshot beside an
// intact older one: Salvage keeps the older snapshot and drops the
// events that do not follow it without a gap. Dropped counts the records
// as written, so every store reports the same count for the same damage,
// wherever it kept the damaged record (a store's log, its buckets).
func RunSalvage(t *testing.T, open func(t *testing.T) durability.Store, damage Damage) {
	t.Helper()
	d := NewDataset(5, 3, 10)
	s := open(t)
	d.Write(t, s, 0)
	d.Write(t, s, 1)
	se := d.Sessions[1]
	const damagedAt = 8
	s2, err := damage(t, s, se.Name, durability.RecordEvent, damagedAt, 1)
	if err != nil {
		t.Fatalf("damage: %v", err)
	}
	defer s2.Close()
	sv, ok := s2.(durability.Salvager)
	if !ok {
		t.Fatalf("%T does not implement durability.Salvager", s2)
	}
	if o, problems := d.Check(t, s2); o.Damaged == 0 || o.Different+o.Other > 0 {
		t.Fatalf("before Salvage: %+v %v, want the damaged session's reads to fail", o, problems)
	}
	got, err := sv.Salvage(t.Context(), se.Name)
	want := durability.Salvaged{Snapshot: true, SnapshotIndex: 5, From: 5, Events: damagedAt - 5, Dropped: 2}
	if err != nil || got != want {
		t.Fatalf("Salvage = %+v, %v; want %+v (events 8, damaged, and 9 dropped)", got, err, want)
	}
	se.Events = se.Events[:damagedAt-5]
	d.Sessions[1] = se
	if o, problems := d.Check(t, s2); o.Exact != 2*len(d.Sessions) {
		t.Errorf("after Salvage: %+v %v", o, problems)
	}
	if err := s2.PersistEvent(t.Context(), se.Name, damagedAt, []byte("again")); err != nil {
		t.Fatalf("a new event after Salvage: %v", err)
	}
	n := 0
	if err := s2.GetEvents(t.Context(), se.Name, 5, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != damagedAt-5+1 {
		t.Errorf("after the new event: %d events, %v; want %d", n, err, damagedAt-5+1)
	}
	if again, err := sv.Salvage(t.Context(), d.Sessions[0].Name); err != nil || again.Dropped != 0 || again.Events != len(d.Sessions[0].Events) {
		t.Errorf("Salvage of an intact session = %+v, %v; want nothing dropped", again, err)
	}
	t.Run("NewestSnapshotDamaged", func(t *testing.T) { runSalvageNewestSnapshot(t, open, damage) })
}

// runSalvageNewestSnapshot is RunSalvage's case of a damaged newest
// snapshot (at 8, events 8 and 9 after it) beside an intact older one
// (at 3, persisted after it, so the events below 8 are compacted away):
// Salvage keeps the older snapshot and drops the damaged one and the
// events 8 and 9, which do not follow the kept snapshot without a gap;
// the actor then recovers from the older snapshot alone.
func runSalvageNewestSnapshot(t *testing.T, open func(t *testing.T) durability.Store, damage Damage) {
	ctx := t.Context()
	s := open(t)
	name, newest, older := twoSnapshots(t, s)
	s2, err := damage(t, s, name, durability.RecordSnapshot, 8, len(newest)/2)
	if err != nil {
		t.Fatalf("damage: %v", err)
	}
	defer s2.Close()
	sv, ok := s2.(durability.Salvager)
	if !ok {
		t.Fatalf("%T does not implement durability.Salvager", s2)
	}
	got, err := sv.Salvage(ctx, name)
	// Dropped counts the damaged snapshot and events 8 and 9, also where
	// a store had set the snapshot aside as lost when it found the damage.
	if want := (durability.Salvaged{Snapshot: true, SnapshotIndex: 3, From: 3, Dropped: 3}); err != nil || got != want {
		t.Fatalf("Salvage = %+v, %v; want %+v (the snapshot at 3 kept; the one at 8 and events 8 and 9 dropped)", got, err, want)
	}
	if snap, ok, err := s2.GetSnapshot(ctx, name); err != nil || !ok || snap.Index != 3 || string(snap.Data) != older {
		t.Errorf("GetSnapshot after Salvage = %v, index %d %q, %v; want index 3 %q", ok, snap.Index, snap.Data, err, older)
	}
	n := 0
	if err := s2.GetEvents(ctx, name, 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("GetEvents after Salvage: %d events, %v; want none", n, err)
	}
}
