package durabilitytest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// Run checks that the stores made by open honour the [durability.Store]
// contract with its default configuration (compaction on). Each subtest
// calls open once and closes the store it gets; open may register more
// cleanup (temporary files) with t.Cleanup and should fail t if it cannot
// open a store.
//
// Run's subtests run sequentially; the concurrency subtests start their own
// goroutines and wait for them.
func Run(t *testing.T, open func(t *testing.T) durability.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s durability.Store)
	}{
		{"Empty", testEmpty},
		{"InvalidName", testInvalidName},
		{"EventOrder", testEventOrder},
		{"EventRanges", testEventRanges},
		{"EventOverwrite", testEventOverwrite},
		{"BatchEvents", testBatchEvents},
		{"BatchEdgeCases", testBatchEdgeCases},
		{"BatchConcurrent", testBatchConcurrent},
		{"CallbackError", testCallbackError},
		{"CallbackMayWrite", testCallbackMayWrite},
		{"CallbackPanics", testCallbackPanics},
		{"DataOwnership", testDataOwnership},
		{"NamesIsolated", testNamesIsolated},
		{"SnapshotLatest", testSnapshotLatest},
		{"SnapshotRecovery", testSnapshotRecovery},
		{"Compaction", testCompaction},
		{"SnapshotAtZero", testSnapshotAtZero},
		{"DeleteEvents", testDeleteEvents},
		{"DeleteSnapshots", testDeleteSnapshots},
		{"EmptyValue", testEmptyValue},
		{"LargeValues", testLargeValues},
		{"ContextDone", testContextDone},
		{"Concurrent", testConcurrent},
		{"SnapshotsConcurrent", testSnapshotsConcurrent},
		{"ErrorsAfterClose", testErrorsAfterClose},
		{"CloseDuringWrites", testCloseDuringWrites},
		{"Model", testModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			tt.fn(t, s)
		})
	}
}

type event struct {
	Index uint64
	Data  string
}

// events returns name's events in [from, to) as GetEvents reports them.
func events(t *testing.T, s durability.Store, name string, from, to uint64) []event {
	t.Helper()
	var got []event
	err := s.GetEvents(t.Context(), name, from, to, func(i uint64, d []byte) error {
		got = append(got, event{i, string(d)})
		return nil
	})
	if err != nil {
		t.Fatalf("GetEvents(%q, %d, %d): %v", name, from, to, err)
	}
	return got
}

func persist(t *testing.T, s durability.Store, name string, indexes ...uint64) {
	t.Helper()
	for _, i := range indexes {
		if err := s.PersistEvent(t.Context(), name, i, fmt.Appendf(nil, "%s-%d", name, i)); err != nil {
			t.Fatalf("PersistEvent(%q, %d): %v", name, i, err)
		}
	}
}

func persistSnapshot(t *testing.T, s durability.Store, name string, index uint64, data string) {
	t.Helper()
	if err := s.PersistSnapshot(t.Context(), name, index, []byte(data)); err != nil {
		t.Fatalf("PersistSnapshot(%q, %d): %v", name, index, err)
	}
}

func snapshot(t *testing.T, s durability.Store, name string) (durability.Snapshot, bool) {
	t.Helper()
	snap, ok, err := s.GetSnapshot(t.Context(), name)
	if err != nil {
		t.Fatalf("GetSnapshot(%q): %v", name, err)
	}
	return snap, ok
}

// want builds the events persist writes for the given indexes.
func want(name string, indexes ...uint64) []event {
	var w []event
	for _, i := range indexes {
		w = append(w, event{i, fmt.Sprintf("%s-%d", name, i)})
	}
	return w
}

func checkEvents(t *testing.T, got, want []event) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func checkStoreError(t *testing.T, err error, op, name string, cause error) {
	t.Helper()
	var se *durability.StoreError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *durability.StoreError", err, err)
	}
	if se.Op != op || se.Name != name {
		t.Errorf("StoreError{Op: %q, Name: %q}, want {%q, %q}", se.Op, se.Name, op, name)
	}
	if !errors.Is(err, cause) {
		t.Errorf("error %v does not wrap %v", err, cause)
	}
}

func testEmpty(t *testing.T, s durability.Store) {
	checkEvents(t, events(t, s, "nobody", 0, 0), nil)
	if snap, ok := snapshot(t, s, "nobody"); ok {
		t.Errorf("GetSnapshot of unknown name = %+v, want none", snap)
	}
	for _, err := range []error{
		s.DeleteEvents(t.Context(), "nobody", 10),
		s.DeleteSnapshots(t.Context(), "nobody", 10),
	} {
		if err != nil {
			t.Errorf("delete on unknown name: %v", err)
		}
	}
}

func testInvalidName(t *testing.T, s durability.Store) {
	ctx := t.Context()
	checkStoreError(t, s.PersistEvent(ctx, "", 0, []byte("x")), durability.OpPersistEvent, "", durability.ErrInvalidName)
	checkStoreError(t, s.PersistSnapshot(ctx, "", 0, []byte("x")), durability.OpPersistSnapshot, "", durability.ErrInvalidName)
	checkStoreError(t, s.GetEvents(ctx, "", 0, 0, func(uint64, []byte) error { return nil }), durability.OpGetEvents, "", durability.ErrInvalidName)
	_, _, err := s.GetSnapshot(ctx, "")
	checkStoreError(t, err, durability.OpGetSnapshot, "", durability.ErrInvalidName)
	checkStoreError(t, s.DeleteEvents(ctx, "", 1), durability.OpDeleteEvents, "", durability.ErrInvalidName)
	checkStoreError(t, s.DeleteSnapshots(ctx, "", 1), durability.OpDeleteSnapshots, "", durability.ErrInvalidName)
}

func testEventOrder(t *testing.T, s durability.Store) {
	// Out of order, across byte boundaries of the index, up to the maximum.
	persist(t, s, "a", 256, 3, 1<<40, 0, 255, 1, ^uint64(0))
	checkEvents(t, events(t, s, "a", 0, 0), want("a", 0, 1, 3, 255, 256, 1<<40, ^uint64(0)))
}

func testEventRanges(t *testing.T, s durability.Store) {
	persist(t, s, "r", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	for _, c := range []struct {
		from, to uint64
		want     []event
	}{
		{0, 0, want("r", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{3, 0, want("r", 3, 4, 5, 6, 7, 8, 9)},
		{2, 5, want("r", 2, 3, 4)},
		{4, 5, want("r", 4)},
		{5, 5, nil},
		{7, 3, nil},
		{9, 100, want("r", 9)},
		{10, 0, nil},
		{0, 1, want("r", 0)},
	} {
		got := events(t, s, "r", c.from, c.to)
		if !slices.Equal(got, c.want) {
			t.Errorf("GetEvents(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

func testEventOverwrite(t *testing.T, s durability.Store) {
	persist(t, s, "o", 0, 1)
	if err := s.PersistEvent(t.Context(), "o", 1, []byte("again")); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events(t, s, "o", 0, 0), []event{{0, "o-0"}, {1, "again"}})
}

func persistBatch(t *testing.T, s durability.Store, name string, first uint64, n int) {
	t.Helper()
	data := make([][]byte, n)
	for k := range data {
		data[k] = fmt.Appendf(nil, "%s-%d", name, first+uint64(k))
	}
	if err := s.PersistEvents(t.Context(), name, first, data); err != nil {
		t.Fatalf("PersistEvents(%q, %d, %d events): %v", name, first, n, err)
	}
}

func span(first uint64, n int) []uint64 {
	idx := make([]uint64, n)
	for k := range idx {
		idx[k] = first + uint64(k)
	}
	return idx
}

// testBatchEvents persists batches next to single events: the batch's
// events are at consecutive indexes, replace what was there, mix with
// single writes, compact under a snapshot, and the caller's slices may be
// reused once the call returns.
func testBatchEvents(t *testing.T, s durability.Store) {
	ctx := t.Context()
	persistBatch(t, s, "b", 0, 5)
	persist(t, s, "b", 5)
	persistBatch(t, s, "b", 6, 1)
	checkEvents(t, events(t, s, "b", 0, 0), want("b", span(0, 7)...))

	// Overwrite across the end of what exists.
	if err := s.PersistEvents(ctx, "b", 5, [][]byte{[]byte("five"), []byte("six"), []byte("seven")}); err != nil {
		t.Fatal(err)
	}
	got := events(t, s, "b", 4, 0)
	wantEvents := []event{{4, "b-4"}, {5, "five"}, {6, "six"}, {7, "seven"}}
	checkEvents(t, got, wantEvents)

	// Ownership: the batch's slices (and the outer slice) are the caller's.
	buf := [][]byte{[]byte("own-0"), []byte("own-1")}
	if err := s.PersistEvents(ctx, "own", 0, buf); err != nil {
		t.Fatal(err)
	}
	copy(buf[0], "XXXXX")
	buf[1] = []byte("replaced")
	checkEvents(t, events(t, s, "own", 0, 0), []event{{0, "own-0"}, {1, "own-1"}})

	// A long batch with large and empty values, then a snapshot that
	// compacts into the middle of it.
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	long := make([][]byte, 300)
	for k := range long {
		switch k % 3 {
		case 0:
			long[k] = fmt.Appendf(nil, "long-%d", k)
		case 1:
			long[k] = nil
		}
	}
	long[150] = big
	if err := s.PersistEvents(ctx, "long", 10, long); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.GetEvents(ctx, "long", 0, 0, func(i uint64, d []byte) error {
		if i != uint64(10+n) {
			return fmt.Errorf("event %d at position %d", i, n)
		}
		w := long[n]
		if n == 150 {
			w = big
		}
		if !bytes.Equal(d, w) {
			t.Errorf("long batch event %d: %d bytes, want %d", i, len(d), len(w))
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(long) {
		t.Errorf("long batch read back %d events, want %d", n, len(long))
	}
	persistSnapshot(t, s, "long", 200, "mid")
	if got := events(t, s, "long", 0, 0); len(got) != 110 || got[0].Index != 200 {
		t.Errorf("after snapshot at 200: %d events from %v, want 110 from 200", len(got), got[:min(len(got), 1)])
	}
}

// testBatchEdgeCases: an empty batch stores nothing, a batch ending at the
// largest index works, one that would pass it is refused whole, and the
// usual checks apply.
func testBatchEdgeCases(t *testing.T, s durability.Store) {
	ctx := t.Context()
	if err := s.PersistEvents(ctx, "e", 3, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	if err := s.PersistEvents(ctx, "e", 3, [][]byte{}); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	checkEvents(t, events(t, s, "e", 0, 0), nil)

	top := ^uint64(0)
	persistBatch(t, s, "top", top-2, 3)
	checkEvents(t, events(t, s, "top", 0, 0), want("top", top-2, top-1, top))
	err := s.PersistEvents(ctx, "over", top-1, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	checkStoreError(t, err, durability.OpPersistEvents, "over", durability.ErrIndexOverflow)
	checkEvents(t, events(t, s, "over", 0, 0), nil)

	checkStoreError(t, s.PersistEvents(ctx, "", 0, [][]byte{[]byte("x")}), durability.OpPersistEvents, "", durability.ErrInvalidName)
	checkStoreError(t, s.PersistEvents(ctx, "", 0, nil), durability.OpPersistEvents, "", durability.ErrInvalidName)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	checkStoreError(t, s.PersistEvents(cctx, "cancelled", 0, [][]byte{[]byte("x")}), durability.OpPersistEvents, "cancelled", context.Canceled)
	checkStoreError(t, s.PersistEvents(cctx, "cancelled", 0, nil), durability.OpPersistEvents, "cancelled", context.Canceled)
	checkEvents(t, events(t, s, "cancelled", 0, 0), nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkStoreError(t, s.PersistEvents(ctx, "closed", 0, [][]byte{[]byte("x")}), durability.OpPersistEvents, "closed", durability.ErrClosed)
	checkStoreError(t, s.PersistEvents(ctx, "closed", 0, nil), durability.OpPersistEvents, "closed", durability.ErrClosed)
}

// testBatchConcurrent has writers persist batches while readers of the
// same names check that they never see part of a batch: each batch
// rewrites the same indexes with one generation number.
func testBatchConcurrent(t *testing.T, s durability.Store) {
	const names, gens, width = 6, 15, 6
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 2*names)
	for n := range names {
		name := fmt.Sprintf("batch-%d", n)
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			for g := range gens {
				data := make([][]byte, width)
				for k := range data {
					data[k] = fmt.Appendf(nil, "gen-%d", g)
				}
				if err := s.PersistEvents(ctx, name, 0, data); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var seen []string
				if err := s.GetEvents(ctx, name, 0, 0, func(_ uint64, d []byte) error {
					seen = append(seen, string(d))
					return nil
				}); err != nil {
					errs <- err
					return
				}
				if len(seen) != 0 && (len(seen) != width || len(slices.Compact(slices.Clone(seen))) != 1) {
					errs <- fmt.Errorf("%s: read part of a batch: %v", name, seen)
					return
				}
			}
		})
	}
	reportErrors(t, &wg, errs)
	for n := range names {
		name := fmt.Sprintf("batch-%d", n)
		got := events(t, s, name, 0, 0)
		if len(got) != width || got[0].Data != fmt.Sprintf("gen-%d", gens-1) || got[width-1].Data != got[0].Data {
			t.Errorf("%s after the last batch: %v", name, got)
		}
	}
}

func testCallbackError(t *testing.T, s durability.Store) {
	persist(t, s, "c", 0, 1, 2, 3)
	stop := errors.New("stop here")
	var seen []uint64
	err := s.GetEvents(t.Context(), "c", 0, 0, func(i uint64, _ []byte) error {
		seen = append(seen, i)
		if i == 1 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("GetEvents returned %v, want the callback's error unchanged", err)
	}
	if !slices.Equal(seen, []uint64{0, 1}) {
		t.Errorf("callback saw %v, want [0 1]", seen)
	}
}

func testCallbackMayWrite(t *testing.T, s durability.Store) {
	persist(t, s, "src", 0, 1, 2)
	err := s.GetEvents(t.Context(), "src", 0, 0, func(i uint64, d []byte) error {
		return s.PersistEvent(t.Context(), "dst", i, d)
	})
	if err != nil {
		t.Fatalf("GetEvents with writing callback: %v", err)
	}
	checkEvents(t, events(t, s, "dst", 0, 0), []event{{0, "src-0"}, {1, "src-1"}, {2, "src-2"}})
}

// testCallbackPanics: a GetEvents callback that panics (an actor's code
// failing while its events are replayed) unwinds through the store, which
// is left usable: the supervisor restarts the actor, and its recovery
// reads again. A store that held a lock, a transaction or a connection
// across the callback would hang or fail here.
func testCallbackPanics(t *testing.T, s durability.Store) {
	const rounds = 10 // more than a small pool's connections
	persist(t, s, "p", 0, 1, 2)
	for round := range rounds {
		func() {
			defer func() {
				if r := recover(); r != "replay failed" {
					t.Fatalf("round %d: recovered %v, want the callback's panic", round, r)
				}
			}()
			_ = s.GetEvents(t.Context(), "p", 0, 0, func(i uint64, _ []byte) error {
				if i == 1 {
					panic("replay failed")
				}
				return nil
			})
			t.Fatalf("round %d: GetEvents returned past a panicking callback", round)
		}()
		persist(t, s, "p", uint64(3+round))
		persistSnapshot(t, s, "p", 1, "after the panic")
		if err := s.DeleteSnapshots(t.Context(), "p", 1); err != nil {
			t.Fatal(err)
		}
	}
	checkEvents(t, events(t, s, "p", 0, 0), want("p", span(1, 2+rounds)...))
}

func testDataOwnership(t *testing.T, s durability.Store) {
	ctx := t.Context()
	buf := []byte("original")
	if err := s.PersistEvent(ctx, "own", 0, buf); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistSnapshot(ctx, "own", 0, buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXX") // the store must not have kept buf
	err := s.GetEvents(ctx, "own", 0, 0, func(_ uint64, d []byte) error {
		copy(d, "YYYYYYYY") // nor hand out its own memory
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := snapshot(t, s, "own")
	copy(snap.Data, "ZZZZZZZZ")
	checkEvents(t, events(t, s, "own", 0, 0), []event{{0, "original"}})
	if snap, _ := snapshot(t, s, "own"); string(snap.Data) != "original" {
		t.Errorf("snapshot = %q, want %q", snap.Data, "original")
	}

	// The slices handed to the callback stay the caller's after it
	// returns: a store does not reuse one buffer for the next event, nor
	// for the next read.
	persist(t, s, "kept", 0, 1, 2, 3, 4)
	var kept [][]byte
	for range 2 {
		if err := s.GetEvents(ctx, "kept", 0, 0, func(_ uint64, d []byte) error {
			kept = append(kept, d)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for k, d := range kept {
		if w := fmt.Sprintf("kept-%d", k%5); string(d) != w {
			t.Errorf("event data kept from read %d holds %q after the read, want %q", k/5, d, w)
		}
	}
}

func testNamesIsolated(t *testing.T, s durability.Store) {
	names := []string{"a", "ab", "a/b", "b", "événement", "with space", "\x00nul", "x\xffy"}
	for n, name := range names {
		persist(t, s, name, 0, uint64(n+1))
		persistSnapshot(t, s, name, uint64(n+1), "snap-"+name)
	}
	for n, name := range names {
		checkEvents(t, events(t, s, name, 0, 0), want(name, uint64(n+1)))
		snap, ok := snapshot(t, s, name)
		if !ok || snap.Index != uint64(n+1) || string(snap.Data) != "snap-"+name {
			t.Errorf("GetSnapshot(%q) = %+v, %v", name, snap, ok)
		}
	}
	if err := s.DeleteEvents(t.Context(), "a", 100); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events(t, s, "ab", 0, 0), want("ab", 2))
}

func testSnapshotLatest(t *testing.T, s durability.Store) {
	persistSnapshot(t, s, "s", 5, "five")
	persistSnapshot(t, s, "s", 9, "nine")
	if snap, ok := snapshot(t, s, "s"); !ok || snap.Index != 9 || string(snap.Data) != "nine" {
		t.Errorf("GetSnapshot = %+v, %v; want index 9 %q", snap, ok, "nine")
	}
	// A snapshot at a lower index does not hide the newest one.
	persistSnapshot(t, s, "s", 7, "seven")
	if snap, ok := snapshot(t, s, "s"); !ok || snap.Index != 9 {
		t.Errorf("after persisting at 7, GetSnapshot = %+v, %v; want index 9", snap, ok)
	}
	persistSnapshot(t, s, "s", 9, "nine again")
	if snap, _ := snapshot(t, s, "s"); string(snap.Data) != "nine again" {
		t.Errorf("snapshot at same index not replaced: %q", snap.Data)
	}
}

// testSnapshotRecovery follows protoactor's sequence: events 0..9 persisted,
// a snapshot taken at 5 holds the state before event 5; recovery is the
// snapshot plus events from 5 on.
func testSnapshotRecovery(t *testing.T, s durability.Store) {
	persist(t, s, "p", 0, 1, 2, 3, 4, 5)
	persistSnapshot(t, s, "p", 5, "state after 0..4")
	persist(t, s, "p", 6, 7, 8, 9)
	snap, ok := snapshot(t, s, "p")
	if !ok || snap.Index != 5 || string(snap.Data) != "state after 0..4" {
		t.Fatalf("GetSnapshot = %+v, %v", snap, ok)
	}
	checkEvents(t, events(t, s, "p", snap.Index, 0), want("p", 5, 6, 7, 8, 9))
}

func testCompaction(t *testing.T, s durability.Store) {
	persist(t, s, "k", 0, 1, 2, 3)
	persistSnapshot(t, s, "k", 2, "two")
	persist(t, s, "k", 4, 5)
	checkEvents(t, events(t, s, "k", 0, 0), want("k", 2, 3, 4, 5))
	persistSnapshot(t, s, "k", 5, "five")
	checkEvents(t, events(t, s, "k", 0, 0), want("k", 5))
	// The older snapshot is gone: deleting the newest leaves none.
	if err := s.DeleteSnapshots(t.Context(), "k", 5); err != nil {
		t.Fatal(err)
	}
	if snap, ok := snapshot(t, s, "k"); ok {
		t.Errorf("older snapshot survived compaction: %+v", snap)
	}
}

func testSnapshotAtZero(t *testing.T, s durability.Store) {
	persist(t, s, "z", 0, 1)
	persistSnapshot(t, s, "z", 0, "empty state")
	checkEvents(t, events(t, s, "z", 0, 0), want("z", 0, 1))
	if snap, ok := snapshot(t, s, "z"); !ok || snap.Index != 0 || string(snap.Data) != "empty state" {
		t.Errorf("GetSnapshot = %+v, %v", snap, ok)
	}
}

func testDeleteEvents(t *testing.T, s durability.Store) {
	persist(t, s, "d", 0, 1, 2, 3, 4)
	persistSnapshot(t, s, "d", 0, "snap")
	if err := s.DeleteEvents(t.Context(), "d", 2); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events(t, s, "d", 0, 0), want("d", 3, 4))
	if _, ok := snapshot(t, s, "d"); !ok {
		t.Error("DeleteEvents removed a snapshot")
	}
	if err := s.DeleteEvents(t.Context(), "d", ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events(t, s, "d", 0, 0), nil)
	persist(t, s, "d", 5) // the name stays usable
	checkEvents(t, events(t, s, "d", 0, 0), want("d", 5))

	// Everything, from index 0: through-from+1 must not wrap around.
	persist(t, s, "d0", 0, 1, 2)
	if err := s.DeleteEvents(t.Context(), "d0", ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events(t, s, "d0", 0, 0), nil)
}

func testDeleteSnapshots(t *testing.T, s durability.Store) {
	ctx := t.Context()
	persist(t, s, "ds", 0, 1, 2)
	persistSnapshot(t, s, "ds", 1, "one")
	persistSnapshot(t, s, "ds", 0, "zero") // lower index: no compaction of 1
	if err := s.DeleteSnapshots(ctx, "ds", 0); err != nil {
		t.Fatal(err)
	}
	if snap, ok := snapshot(t, s, "ds"); !ok || snap.Index != 1 {
		t.Errorf("GetSnapshot = %+v, %v; want index 1", snap, ok)
	}
	if err := s.DeleteSnapshots(ctx, "ds", 1); err != nil {
		t.Fatal(err)
	}
	if snap, ok := snapshot(t, s, "ds"); ok {
		t.Errorf("GetSnapshot after deleting all = %+v", snap)
	}
	checkEvents(t, events(t, s, "ds", 0, 0), want("ds", 1, 2))
}

func testEmptyValue(t *testing.T, s durability.Store) {
	ctx := t.Context()
	if err := s.PersistEvent(ctx, "e", 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistSnapshot(ctx, "e", 0, []byte{}); err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events(t, s, "e", 0, 0), []event{{0, ""}})
	if snap, ok := snapshot(t, s, "e"); !ok || len(snap.Data) != 0 {
		t.Errorf("GetSnapshot = %+v, %v; want an empty snapshot", snap, ok)
	}
}

func testLargeValues(t *testing.T, s durability.Store) {
	ctx := t.Context()
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	for i := range uint64(3) {
		if err := s.PersistEvent(ctx, "big", i, big); err != nil {
			t.Fatalf("PersistEvent of %d bytes: %v", len(big), err)
		}
	}
	if err := s.PersistSnapshot(ctx, "big", 1, big[:3<<20]); err != nil {
		t.Fatalf("PersistSnapshot of %d bytes: %v", 3<<20, err)
	}
	var n int
	err := s.GetEvents(ctx, "big", 0, 0, func(i uint64, d []byte) error {
		n++
		if !bytes.Equal(d, big) {
			t.Errorf("event %d: %d bytes differ from the %d persisted", i, len(d), len(big))
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Errorf("GetEvents: %d events, err %v; want 2 events", n, err)
	}
	if snap, ok := snapshot(t, s, "big"); !ok || !bytes.Equal(snap.Data, big[:3<<20]) {
		t.Errorf("large snapshot did not round-trip (ok %v, %d bytes)", ok, len(snap.Data))
	}
}

func testContextDone(t *testing.T, s durability.Store) {
	// Deletes with a done context fail and delete nothing.
	persist(t, s, "kept", 0, 1)
	persistSnapshot(t, s, "kept", 0, "kept")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	checkStoreError(t, s.DeleteEvents(ctx, "kept", 1), durability.OpDeleteEvents, "kept", context.Canceled)
	checkStoreError(t, s.DeleteSnapshots(ctx, "kept", 0), durability.OpDeleteSnapshots, "kept", context.Canceled)
	checkEvents(t, events(t, s, "kept", 0, 0), want("kept", 0, 1))
	if _, ok := snapshot(t, s, "kept"); !ok {
		t.Error("a DeleteSnapshots with a done context deleted the snapshot")
	}

	err := s.PersistEvent(ctx, "ctx", 0, []byte("x"))
	checkStoreError(t, err, durability.OpPersistEvent, "ctx", context.Canceled)
	if !durability.IsRetryable(err) {
		t.Errorf("cancelled persist is not retryable: %v", err)
	}
	checkStoreError(t, s.PersistSnapshot(ctx, "ctx", 0, []byte("x")), durability.OpPersistSnapshot, "ctx", context.Canceled)
	checkStoreError(t, s.GetEvents(ctx, "ctx", 0, 0, func(uint64, []byte) error { return nil }), durability.OpGetEvents, "ctx", context.Canceled)
	_, _, err = s.GetSnapshot(ctx, "ctx")
	checkStoreError(t, err, durability.OpGetSnapshot, "ctx", context.Canceled)
	checkEvents(t, events(t, s, "ctx", 0, 0), nil)
	if _, ok := snapshot(t, s, "ctx"); ok {
		t.Error("a cancelled PersistSnapshot was stored")
	}
}

// testConcurrent runs writers on many names at once, each followed by its
// own reader, plus snapshots with compaction; under -race this also checks
// the store's locking.
func testConcurrent(t *testing.T, s durability.Store) {
	const names, perName = 32, 40
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, names)
	for n := range names {
		wg.Go(func() {
			name := fmt.Sprintf("actor-%d", n)
			for i := range uint64(perName) {
				if err := s.PersistEvent(ctx, name, i, fmt.Appendf(nil, "%s-%d", name, i)); err != nil {
					errs <- err
					return
				}
				if i == perName/2 {
					if err := s.PersistSnapshot(ctx, name, i, []byte(name)); err != nil {
						errs <- err
						return
					}
				}
				// Read back what this writer has persisted so far.
				count := uint64(0)
				err := s.GetEvents(ctx, name, 0, 0, func(uint64, []byte) error { count++; return nil })
				if err != nil {
					errs <- err
					return
				}
				wantCount := i + 1
				if i >= perName/2 { // compacted by the snapshot
					wantCount = i + 1 - perName/2
				}
				if count != wantCount {
					errs <- fmt.Errorf("%s after event %d: read %d events", name, i, count)
					return
				}
			}
		})
	}
	reportErrors(t, &wg, errs)
	for n := range names {
		name := fmt.Sprintf("actor-%d", n)
		var idx []uint64
		for i := uint64(perName / 2); i < perName; i++ {
			idx = append(idx, i)
		}
		checkEvents(t, events(t, s, name, 0, 0), want(name, idx...))
		if snap, ok := snapshot(t, s, name); !ok || snap.Index != perName/2 || string(snap.Data) != name {
			t.Errorf("GetSnapshot(%q) = %+v, %v", name, snap, ok)
		}
	}
}

// testSnapshotsConcurrent has a writer per name persist events and, every
// few events, a snapshot that compacts them, while readers of the same
// names check what recovery relies on: a snapshot's data is the one
// persisted at its index, the events read at once run without a gap,
// and nothing seen goes back: a later snapshot read never returns an
// older snapshot, and events below a snapshot seen (compacted in the
// same atomic step) are not read afterwards.
func testSnapshotsConcurrent(t *testing.T, s durability.Store) {
	const names, perName, every, readers = 4, 60, 7, 2
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, names*(1+readers))
	snapData := func(name string, i uint64) string { return fmt.Sprintf("%s snapshot at %d", name, i) }
	for n := range names {
		name := fmt.Sprintf("snapper-%d", n)
		done := make(chan struct{})
		// A reader reads once after each write it is told of (or more
		// writes, if it is behind), so that it does not starve the writer.
		ticks := make([]chan struct{}, readers)
		for r := range ticks {
			ticks[r] = make(chan struct{}, 1)
		}
		tell := func() {
			for _, tick := range ticks {
				select {
				case tick <- struct{}{}:
				default:
				}
			}
		}
		wg.Go(func() {
			defer close(done)
			for i := range uint64(perName) {
				if err := s.PersistEvent(ctx, name, i, fmt.Appendf(nil, "%s-%d", name, i)); err != nil {
					errs <- err
					return
				}
				tell()
				if i%every == every-1 {
					if err := s.PersistSnapshot(ctx, name, i, []byte(snapData(name, i))); err != nil {
						errs <- err
						return
					}
					tell()
				}
			}
		})
		for _, tick := range ticks {
			wg.Go(func() {
				seen, seenAny := uint64(0), false // the newest snapshot seen
				for {
					select {
					case <-done:
						return
					case <-tick:
					}
					snap, ok, err := s.GetSnapshot(ctx, name)
					switch {
					case err != nil:
						errs <- err
						return
					case ok && string(snap.Data) != snapData(name, snap.Index):
						errs <- fmt.Errorf("%s: snapshot at %d holds %q", name, snap.Index, snap.Data)
						return
					case !ok && seenAny, ok && seenAny && snap.Index < seen:
						errs <- fmt.Errorf("%s: snapshot read went back from %d to %v %d", name, seen, ok, snap.Index)
						return
					case ok:
						seen, seenAny = snap.Index, true
					}
					var got []event
					if err := s.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error {
						got = append(got, event{i, string(d)})
						return nil
					}); err != nil {
						errs <- err
						return
					}
					for k, e := range got {
						if e.Data != fmt.Sprintf("%s-%d", name, e.Index) || k > 0 && e.Index != got[k-1].Index+1 || seenAny && e.Index < seen {
							errs <- fmt.Errorf("%s: events read %v (newest snapshot seen before: %v %d)", name, got, seenAny, seen)
							return
						}
					}
				}
			})
		}
	}
	reportErrors(t, &wg, errs)
	for n := range names {
		name := fmt.Sprintf("snapper-%d", n)
		last := uint64(perName/every*every - 1)
		if snap, ok := snapshot(t, s, name); !ok || snap.Index != last || string(snap.Data) != snapData(name, last) {
			t.Errorf("GetSnapshot(%q) = %v %d %q, want %d", name, ok, snap.Index, snap.Data, last)
		}
		checkEvents(t, events(t, s, name, 0, 0), want(name, span(last, perName-int(last))...))
	}
}

// reportErrors waits for wg's goroutines and reports what they sent on
// errs.
func reportErrors(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testErrorsAfterClose(t *testing.T, s durability.Store) {
	persist(t, s, "c", 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ctx := t.Context()
	checkStoreError(t, s.PersistEvent(ctx, "c", 1, []byte("x")), durability.OpPersistEvent, "c", durability.ErrClosed)
	checkStoreError(t, s.PersistSnapshot(ctx, "c", 1, []byte("x")), durability.OpPersistSnapshot, "c", durability.ErrClosed)
	checkStoreError(t, s.GetEvents(ctx, "c", 0, 0, func(uint64, []byte) error {
		t.Error("callback called after Close")
		return nil
	}), durability.OpGetEvents, "c", durability.ErrClosed)
	_, _, err := s.GetSnapshot(ctx, "c")
	checkStoreError(t, err, durability.OpGetSnapshot, "c", durability.ErrClosed)
	checkStoreError(t, s.DeleteEvents(ctx, "c", 1), durability.OpDeleteEvents, "c", durability.ErrClosed)
	err = s.DeleteSnapshots(ctx, "c", 1)
	checkStoreError(t, err, durability.OpDeleteSnapshots, "c", durability.ErrClosed)
	if durability.IsRetryable(err) {
		t.Errorf("ErrClosed reported as retryable: %v", err)
	}
}

// testCloseDuringWrites closes the store while writers are busy: each write
// either succeeds or fails with ErrClosed, and nothing hangs.
func testCloseDuringWrites(t *testing.T, s durability.Store) {
	const writers = 16
	ctx := t.Context()
	started := make(chan struct{}, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for n := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("w-%d", n)
			for i := uint64(0); ; i++ {
				err := s.PersistEvent(ctx, name, i, []byte("x"))
				if i == 0 {
					started <- struct{}{}
				}
				if errors.Is(err, durability.ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range writers {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close during writes: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("write during Close failed with something other than ErrClosed: %v", err)
	}
}

// model is what the [durability.Store] contract says one actor's store
// holds: its events and snapshots by index.
type model struct {
	events, snapshots map[uint64]string
}

// persistSnapshot is PersistSnapshot with compaction.
func (m *model) persistSnapshot(index uint64, data string) {
	m.snapshots[index] = data
	if index > 0 {
		m.deleteEvents(index - 1)
		maps.DeleteFunc(m.snapshots, func(i uint64, _ string) bool { return i < index })
	}
}

func (m *model) deleteEvents(through uint64) {
	maps.DeleteFunc(m.events, func(i uint64, _ string) bool { return i <= through })
}

// eventsIn returns the model's events with from <= index < to (to == 0:
// no bound) in index order.
func (m *model) eventsIn(from, to uint64) []event {
	var out []event
	for i, d := range m.events {
		if i >= from && (to == 0 || i < to) {
			out = append(out, event{i, d})
		}
	}
	slices.SortFunc(out, func(a, b event) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// testModel drives the store with seeded random writes of every kind on
// two names (events one by one and in batches, overwrites, snapshots
// that compact, snapshots below the newest, deletes; indexes mostly close
// together, some at the top of the range, empty values) and after each
// write compares all that the store returns with a [model] of the
// contract: a store whose reads merge several places (a log and its
// buckets, a cache) is held to the same answers as the simplest one.
func testModel(t *testing.T, s durability.Store) {
	const seeds, steps = 3, 150
	ctx := t.Context()
	top := ^uint64(0)
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 0x30de1))
		names := []string{fmt.Sprintf("model-%d", seed), fmt.Sprintf("model-%d/b", seed)}
		models := map[string]*model{}
		for _, n := range names {
			models[n] = &model{events: map[uint64]string{}, snapshots: map[uint64]string{}}
		}
		index := func() uint64 {
			switch r := rng.IntN(100); {
			case r < 6:
				return top - rng.Uint64N(4)
			case r < 9:
				return 1<<40 + rng.Uint64N(4)
			default:
				return rng.Uint64N(40)
			}
		}
		for step := range steps {
			name := names[rng.IntN(len(names))]
			m := models[name]
			data := func(i uint64) string {
				if rng.IntN(10) == 0 {
					return ""
				}
				return fmt.Sprintf("%s@%d step %d", name, i, step)
			}
			var op string
			var err error
			switch r := rng.IntN(100); {
			case r < 40:
				i := index()
				d := data(i)
				op, err = fmt.Sprintf("PersistEvent(%d)", i), s.PersistEvent(ctx, name, i, []byte(d))
				if err == nil {
					m.events[i] = d
				}
			case r < 60:
				first, n := index(), 1+rng.IntN(5)
				batch := make([][]byte, n)
				want := map[uint64]string{}
				for k := range batch {
					i := first + uint64(k)
					d := data(i)
					batch[k], want[i] = []byte(d), d
				}
				op, err = fmt.Sprintf("PersistEvents(%d, %d events)", first, n), s.PersistEvents(ctx, name, first, batch)
				if first+uint64(n-1) < first {
					if !errors.Is(err, durability.ErrIndexOverflow) {
						t.Fatalf("seed %d step %d: %s on %q = %v, want ErrIndexOverflow", seed, step, op, name, err)
					}
					err = nil
				} else if err == nil {
					maps.Copy(m.events, want)
				}
			case r < 75:
				i := index()
				d := data(i)
				op, err = fmt.Sprintf("PersistSnapshot(%d)", i), s.PersistSnapshot(ctx, name, i, []byte(d))
				if err == nil {
					m.persistSnapshot(i, d)
				}
			case r < 90:
				through := index()
				op, err = fmt.Sprintf("DeleteEvents(%d)", through), s.DeleteEvents(ctx, name, through)
				if err == nil {
					m.deleteEvents(through)
				}
			default:
				through := index()
				op, err = fmt.Sprintf("DeleteSnapshots(%d)", through), s.DeleteSnapshots(ctx, name, through)
				if err == nil {
					maps.DeleteFunc(m.snapshots, func(i uint64, _ string) bool { return i <= through })
				}
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %s on %q: %v", seed, step, op, name, err)
			}
			// Every name, not only the one written: names are isolated.
			for _, n := range names {
				checkModel(t, s, n, models[n], rng, fmt.Sprintf("seed %d step %d, after %s on %q", seed, step, op, name))
			}
		}
	}
}

// checkModel compares what s holds for name with m: the newest snapshot,
// all events, and the events of a random range.
func checkModel(t *testing.T, s durability.Store, name string, m *model, rng *rand.Rand, when string) {
	t.Helper()
	snap, ok := snapshot(t, s, name)
	if len(m.snapshots) == 0 {
		if ok {
			t.Fatalf("%s: %q has snapshot %d %q, want none", when, name, snap.Index, snap.Data)
		}
	} else if newest := slices.Max(slices.Collect(maps.Keys(m.snapshots))); !ok || snap.Index != newest || string(snap.Data) != m.snapshots[newest] {
		t.Fatalf("%s: %q snapshot = %v, %d %q; want %d %q", when, name, ok, snap.Index, snap.Data, newest, m.snapshots[newest])
	}
	if got, want := events(t, s, name, 0, 0), m.eventsIn(0, 0); !slices.Equal(got, want) {
		t.Fatalf("%s: %q events = %v, want %v", when, name, got, want)
	}
	from, to := rng.Uint64N(45), rng.Uint64N(45)
	if rng.IntN(4) == 0 {
		to = 0
	}
	if got, want := events(t, s, name, from, to), m.eventsIn(from, to); !slices.Equal(got, want) {
		t.Fatalf("%s: %q events in [%d, %d) = %v, want %v", when, name, from, to, got, want)
	}
}

// RunNameLimit checks a store's limit on actor names: every method
// (Salvage too, for a [durability.Salvager]) refuses a name of limit+1
// bytes with a *durability.StoreError wrapping durability.ErrInvalidName
// whose message says the name's length and the limit, and stores nothing
// under it; a name of limit bytes is stored and read back.
func RunNameLimit(t *testing.T, open func(t *testing.T) durability.Store, limit int) {
	t.Helper()
	s := open(t)
	defer s.Close()
	ctx := t.Context()
	long := string(bytes.Repeat([]byte("n"), limit+1))
	check := func(err error, op string) {
		t.Helper()
		checkStoreError(t, err, op, long, durability.ErrInvalidName)
		if msg := fmt.Sprint(err); !strings.Contains(msg, fmt.Sprintf("%d bytes", limit+1)) || !strings.Contains(msg, fmt.Sprint(limit)) {
			t.Errorf("%s with a name of %d bytes: %.200s..., want the name's length and the limit %d said", op, limit+1, msg, limit)
		}
	}
	check(s.PersistEvent(ctx, long, 0, []byte("x")), durability.OpPersistEvent)
	check(s.PersistEvents(ctx, long, 0, [][]byte{[]byte("x")}), durability.OpPersistEvents)
	check(s.PersistSnapshot(ctx, long, 0, []byte("x")), durability.OpPersistSnapshot)
	check(s.GetEvents(ctx, long, 0, 0, func(uint64, []byte) error { return nil }), durability.OpGetEvents)
	_, _, err := s.GetSnapshot(ctx, long)
	check(err, durability.OpGetSnapshot)
	check(s.DeleteEvents(ctx, long, 1), durability.OpDeleteEvents)
	check(s.DeleteSnapshots(ctx, long, 1), durability.OpDeleteSnapshots)
	if sv, ok := s.(durability.Salvager); ok {
		_, err := sv.Salvage(ctx, long)
		check(err, "salvage")
	}
	most := long[:limit]
	persist(t, s, most, 0, 1)
	checkEvents(t, events(t, s, most, 0, 0), want(most, 0, 1))
}
