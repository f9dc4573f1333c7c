package memstore_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/durability/memstore"
)

// TestEvents_AgainstMap drives a store with random writes and deletions,
// mostly at consecutive indexes (as actors persist) but also with gaps,
// jumps back and far ahead, and compares what it holds with a plain map
// after every step: the log's window and map forms, and the moves between
// them, keep the same contents.
func TestEvents_AgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := memstore.New(nil)
		want := map[uint64]string{}
		next := uint64(rng.IntN(1000))
		for step := range 600 {
			var op string
			switch r := rng.IntN(100); {
			case r < 60: // the next index
				op = put(t, s, want, next, step)
				next++
			case r < 70: // overwrite or fill a recent index
				op = put(t, s, want, next-uint64(rng.IntN(8))-1, step)
			case r < 76: // a small gap
				next += uint64(rng.IntN(100))
				op = put(t, s, want, next, step)
				next++
			case r < 79: // far ahead, or back
				i := rng.Uint64()
				if rng.IntN(2) == 0 {
					i = next / 2
				}
				op = put(t, s, want, i, step)
			case r < 95: // compaction-like deletion
				through := next - uint64(rng.IntN(20))
				if err := s.DeleteEvents(t.Context(), "a", through); err != nil {
					t.Fatal(err)
				}
				maps.DeleteFunc(want, func(i uint64, _ string) bool { return i <= through })
				op = fmt.Sprintf("delete through %d", through)
			default: // delete everything
				if err := s.DeleteEvents(t.Context(), "a", ^uint64(0)); err != nil {
					t.Fatal(err)
				}
				clear(want)
				op = "delete all"
			}
			from := next - uint64(rng.IntN(50))
			got := map[uint64]string{}
			err := s.GetEvents(t.Context(), "a", from, 0, func(i uint64, d []byte) error {
				got[i] = string(d)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := maps.Clone(want)
			maps.DeleteFunc(wantFrom, func(i uint64, _ string) bool { return i < from })
			if !maps.Equal(got, wantFrom) {
				t.Fatalf("seed %d step %d (%s): events from %d = %v, want %v", seed, step, op, from,
					slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(wantFrom)))
			}
		}
		s.Close()
	}
}

func put(t *testing.T, s *memstore.Store, want map[uint64]string, index uint64, step int) string {
	t.Helper()
	data := fmt.Sprintf("e%d@%d", index, step)
	if err := s.PersistEvent(t.Context(), "a", index, []byte(data)); err != nil {
		t.Fatal(err)
	}
	want[index] = data
	return fmt.Sprintf("put %d", index)
}
