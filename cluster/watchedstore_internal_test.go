package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
)

// TestWatchStore_KeepsOptionalInterfaces: the store an incarnation gives
// its loop implements durability.Salvager exactly when the store it
// watches (the claim) does, since its host finds it by a type
// assertion; Salvage reaches the watched store, and a failure of the
// store in Salvage is noted as the others are.
func TestWatchStore_KeepsOptionalInterfaces(t *testing.T) {
	ctx := context.Background()

	plain := memstore.New(nil)
	defer plain.Close()
	if _, got := watchStore(struct{ durability.Store }{plain}); isSalvager(got) {
		t.Errorf("%T watching a store without Salvage is a durability.Salvager", got)
	}

	mem := memstore.New(nil)
	w, got := watchStore(mem)
	sv, ok := got.(durability.Salvager)
	if !ok {
		t.Fatalf("%T watching a memstore is not a durability.Salvager", got)
	}
	if err := got.PersistEvents(ctx, "a", 0, [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if out, err := sv.Salvage(ctx, "a"); err != nil || out.Events != 2 || out.Dropped != 0 {
		t.Fatalf("Salvage = %+v, %v; want the 2 events kept", out, err)
	}
	if err := w.failure(); err != nil {
		t.Fatalf("failure after a Salvage that worked: %v, want none", err)
	}
	if err := mem.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Salvage(ctx, "a"); !errors.Is(err, durability.ErrClosed) {
		t.Fatalf("Salvage of a closed store: %v, want durability.ErrClosed", err)
	}
	if err := w.failure(); !errors.Is(err, durability.ErrClosed) {
		t.Errorf("failure after a Salvage of a closed store: %v, want its durability.ErrClosed noted", err)
	}
}

func isSalvager(s durability.Store) bool {
	_, ok := s.(durability.Salvager)
	return ok
}
