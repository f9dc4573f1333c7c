package pgstore_test

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// TestUnclaimed_TwoStoresInterleave guards what the package doc says of
// two processes writing one session without Claim: no write fails for
// the other's, the last to commit wins row by row, a snapshot of one
// compacts the other's events away, and what is left reads without error
// (each row whole) though neither process wrote that history.
func TestUnclaimed_TwoStoresInterleave(t *testing.T) {
	schema := freshSchema()
	a := open(t, &pgstore.Options{Schema: schema})
	defer a.Close()
	b := open(t, &pgstore.Options{Schema: schema})
	defer b.Close()
	ctx := t.Context()
	const name = "session/loop"
	for _, w := range []struct {
		s    *pgstore.Store
		idx  uint64
		data string
	}{{a, 0, "a0"}, {a, 1, "a1"}, {b, 1, "b1"}, {b, 2, "b2"}, {a, 3, "a3"}} {
		if err := w.s.PersistEvent(ctx, name, w.idx, []byte(w.data)); err != nil {
			t.Fatalf("unfenced write %s: %v, want nil", w.data, err)
		}
	}
	want := []string{"0:a0", "1:b1", "2:b2", "3:a3"}
	for _, s := range []*pgstore.Store{a, b} {
		if got := stored(t, s, name); !slices.Equal(got, want) {
			t.Fatalf("events %q, want the interleaved %q", got, want)
		}
	}
	if err := b.PersistSnapshot(ctx, name, 2, []byte("b's state at 2")); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, a, name); !slices.Equal(got, []string{"2:b2", "3:a3"}) {
		t.Fatalf("events after b's snapshot at 2, read by a: %q, want [2:b2 3:a3]", got)
	}
	snap, ok, err := a.GetSnapshot(ctx, name)
	if err != nil || !ok || string(snap.Data) != "b's state at 2" {
		t.Fatalf("a reads snapshot %q %v %v, want b's", snap.Data, ok, err)
	}
}
