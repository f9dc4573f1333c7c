package boltstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
)

// TestCheckpoint_CrashAtEveryCommit runs seeded random writes (events,
// batches, compacting snapshots, deletes) over several actors with
// checkpoints a few steps of one actor at a time, and copies the file
// after every acknowledged write, as a crash right then would leave it:
// each copy verifies intact and opens (replaying the log over buckets that
// hold part of a checkpoint) and holds exactly what a memstore given the
// same writes holds, and so does the live store, read while checkpoints
// are under way.
func TestCheckpoint_CrashAtEveryCommit(t *testing.T) {
	t.Parallel()
	ops := 300
	if raceDetector || testing.Short() {
		ops = 100
	}
	dir := memDir(t)
	path := filepath.Join(dir, "store.db")
	s, err := Open(path, &Options{NoSync: true, CheckpointOps: 12})
	if err != nil {
		t.Fatal(err)
	}
	s.stepRecords, s.minStepRecords = 2, 1 // a checkpoint takes several commits
	defer s.Close()
	model := memstore.New(nil)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(11, 12))
	names := []string{"a", "b", "c", "d", "e"}
	next := map[string]uint64{}
	steps := 0
	for op := range ops {
		name := names[rng.IntN(len(names))]
		data := fmt.Appendf(nil, "%s-%d-%x", name, op, rng.Uint64())
		both := func(f func(durability.Store) error) {
			for _, st := range []durability.Store{s, model} {
				if err := f(st); err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
			}
		}
		switch k := rng.IntN(10); {
		case k < 5:
			i := next[name]
			if rng.IntN(5) == 0 && i > 0 {
				i = rng.Uint64N(i) // overwrite
			} else {
				next[name]++
			}
			both(func(st durability.Store) error { return st.PersistEvent(ctx, name, i, data) })
		case k < 7:
			first := next[name]
			batch := [][]byte{data, append(data, '1'), append(data, '2')}
			next[name] += 3
			both(func(st durability.Store) error { return st.PersistEvents(ctx, name, first, batch) })
		case k < 8:
			at := rng.Uint64N(next[name] + 1)
			both(func(st durability.Store) error { return st.PersistSnapshot(ctx, name, at, data) })
		case k < 9:
			through := rng.Uint64N(next[name] + 1)
			both(func(st durability.Store) error { return st.DeleteEvents(ctx, name, through) })
		default:
			through := rng.Uint64N(next[name] + 1)
			both(func(st durability.Store) error { return st.DeleteSnapshots(ctx, name, through) })
		}
		s.viewMu.RLock()
		if s.flushing != nil {
			steps++
		}
		s.viewMu.RUnlock()
		sameState(t, fmt.Sprintf("live store after op %d", op), s, model, names)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cp := filepath.Join(dir, "crash.db")
		if err := os.WriteFile(cp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if r, err := Verify(cp, nil); err != nil || !r.Intact() {
			t.Fatalf("op %d: Verify of the file as a crash leaves it: %v %+v", op, err, r)
		}
		c, err := Open(cp, &Options{NoSync: true})
		if err != nil {
			t.Fatalf("op %d: Open of the file as a crash leaves it: %v", op, err)
		}
		sameState(t, fmt.Sprintf("file after op %d", op), c, model, names)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if steps < ops/4 {
		t.Errorf("a checkpoint was under way after %d of %d writes; the test would not cover them", steps, ops)
	}
}

// sameState fails t unless got holds what want holds for names: the
// newest snapshot and every event.
func sameState(t *testing.T, what string, got, want durability.Store, names []string) {
	t.Helper()
	ctx := t.Context()
	for _, name := range names {
		gs, gok, gerr := got.GetSnapshot(ctx, name)
		ws, wok, _ := want.GetSnapshot(ctx, name)
		if gerr != nil || gok != wok || gs.Index != ws.Index || !bytes.Equal(gs.Data, ws.Data) {
			t.Fatalf("%s: snapshot of %q = %v %d %q, %v; want %v %d %q", what, name, gok, gs.Index, gs.Data, gerr, wok, ws.Index, ws.Data)
		}
		var ge, we []string
		if err := got.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error { ge = append(ge, fmt.Sprint(i, ":", string(d))); return nil }); err != nil {
			t.Fatalf("%s: events of %q: %v", what, name, err)
		}
		_ = want.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error { we = append(we, fmt.Sprint(i, ":", string(d))); return nil })
		if fmt.Sprint(ge) != fmt.Sprint(we) {
			t.Fatalf("%s: events of %q = %v, want %v", what, name, ge, we)
		}
	}
}
