package boltstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// TestDiskFull_WritesFailNotForGood: a write to a full disk (the store's
// descriptor pointed at /dev/full, where every write fails with ENOSPC)
// fails with an error that is not permanent, and once there is room
// again, the same write succeeds.
func TestDiskFull_WritesFailNotForGood(t *testing.T) {
	ctx := t.Context()
	s, _, swap := swappableFile(t)
	for i := range 64 { // the file grows now: the writes below reuse its free pages
		if err := s.PersistEvent(ctx, "a", uint64(i), []byte("kept")); err != nil {
			t.Fatal(err)
		}
	}
	undo := swap("/dev/full", os.O_WRONLY)
	err := s.PersistEvent(ctx, "a", 64, []byte("later"))
	undo()
	if !errors.Is(err, syscall.ENOSPC) || durability.IsPermanent(err) {
		t.Fatalf("PersistEvent on a full disk: %v, want an error wrapping ENOSPC, not permanent", err)
	}
	if err := s.PersistEvent(ctx, "a", 64, []byte("later")); err != nil {
		t.Fatalf("PersistEvent once there is room again: %v", err)
	}
	var got []string
	if err := s.GetEvents(ctx, "a", 63, 0, func(_ uint64, d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[kept later]" {
		t.Errorf("the store holds %v from index 63, want [kept later]", got)
	}
}
