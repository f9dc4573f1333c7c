package inspect_test

import (
	"context"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/inspect"
)

// plainStore is a store with none of the optional interfaces.
type plainStore struct{ durability.Store }

// droppingStore salvages by reporting what it was told to.
type droppingStore struct {
	durability.Store
	salvaged durability.Salvaged
}

func (s droppingStore) Salvage(context.Context, string) (durability.Salvaged, error) {
	return s.salvaged, nil
}

// TestStore_KeepsOptionalInterfaces: the observed store implements
// exactly the optional interfaces of durability the wrapped store does
// (durability.Salvager: a damaged session is salvaged through it, found
// by a type assertion), forwarding them, and shows the position a
// salvage leaves.
func TestStore_KeepsOptionalInterfaces(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	inner := memstore.New(nil)
	defer inner.Close()
	if _, ok := any(inner).(durability.Salvager); !ok {
		t.Fatal("memstore is expected to be a Salvager")
	}
	st := in.Store(inner)
	sv, ok := st.(durability.Salvager)
	if !ok {
		t.Fatalf("Store(memstore) is a %T that does not implement durability.Salvager", st)
	}
	ctx := testCtx(t)
	if err := st.PersistEvents(ctx, "sess-1", 0, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	got, err := sv.Salvage(ctx, "sess-1")
	if err != nil || got.Events != 2 || got.Dropped != 0 {
		t.Fatalf("Salvage through the observed store: %+v, %v; want the 2 intact events kept, nothing dropped", got, err)
	}
	if d := in.Snapshot("sess-1").Session; d == nil || d.Durability == nil || d.Durability.Index != 1 {
		t.Fatalf("position after a salvage that dropped nothing: %+v", d)
	}

	// A salvage that dropped records leaves the position it kept.
	dropping := in.Store(droppingStore{Store: inner, salvaged: durability.Salvaged{Snapshot: true, SnapshotIndex: 1, Events: 0, From: 1, Dropped: 1}})
	if _, err := dropping.(durability.Salvager).Salvage(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
	if d := in.Snapshot("sess-1").Session; d == nil || d.Durability == nil || d.Durability.Index != 1 || d.Durability.Kind != "snapshot" {
		t.Fatalf("position after a salvage that kept the snapshot at 1 only: %+v", d.Durability)
	}

	if plain := in.Store(plainStore{inner}); func() bool { _, ok := plain.(durability.Salvager); return ok }() {
		t.Errorf("Store of a store that is no Salvager is a %T that claims to be one", plain)
	}
}
