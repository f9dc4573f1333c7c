package boltstore

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// writeThrough opens a store, writes events 0 to 63 of actor "a" (the
// file grows now: a write after them reuses its free pages), and writes
// event 64 with its descriptor pointed at the device other, opened
// write-only. It returns the store, its path, and that write's error.
func writeThrough(t *testing.T, other string) (*Store, string, error) {
	t.Helper()
	ctx := t.Context()
	s, path, swap := swappableFile(t)
	for i := range 64 {
		if err := s.PersistEvent(ctx, "a", uint64(i), []byte("kept")); err != nil {
			t.Fatal(err)
		}
	}
	undo := swap(other, os.O_WRONLY)
	defer undo()
	return s, path, s.PersistEvent(ctx, "a", 64, []byte("lost"))
}

// eventsFrom63 returns actor "a"'s events from index 63 on.
func eventsFrom63(t *testing.T, s *Store) string {
	t.Helper()
	return events(t, s, 63)
}

// TestDiskFull_WritesFailNotForGood: a write to a full disk (the store's
// descriptor pointed at /dev/full, where every write fails with ENOSPC)
// fails with an error that is not permanent, and once there is room
// again, the same write succeeds.
func TestDiskFull_WritesFailNotForGood(t *testing.T) {
	s, _, err := writeThrough(t, "/dev/full")
	if !errors.Is(err, syscall.ENOSPC) || durability.IsPermanent(err) {
		t.Fatalf("PersistEvent on a full disk: %v, want an error wrapping ENOSPC, not permanent", err)
	}
	if err := s.PersistEvent(t.Context(), "a", 64, []byte("later")); err != nil {
		t.Fatalf("PersistEvent once there is room again: %v", err)
	}
	if got := eventsFrom63(t, s); got != "[kept later]" {
		t.Errorf("the store holds %v from index 63, want [kept later]", got)
	}
}

// TestSyncFailed_WritesFailUntilReopened: once a commit's sync failed (the
// store's descriptor pointed at /dev/null, which takes writes and fails
// fdatasync with EINVAL; on a disk, EIO), the pages in memory may differ
// from those on disk, and bbolt has rolled back what it thinks it wrote
// while its mapping may show the commit: that write and every later one
// fail for good, naming the file, until the store is opened again, and
// reads go on. Opened again, it takes writes and holds what was
// acknowledged.
func TestSyncFailed_WritesFailUntilReopened(t *testing.T) {
	ctx := t.Context()
	s, path, err := writeThrough(t, "/dev/null")
	if !errors.Is(err, syscall.EINVAL) || !durability.IsPermanent(err) || !strings.Contains(fmt.Sprint(err), path) {
		t.Fatalf("PersistEvent whose sync fails: %v, want a permanent error wrapping EINVAL that names the file", err)
	}
	err = s.PersistEvent(ctx, "a", 64, []byte("later"))
	if !errors.Is(err, syscall.EINVAL) || !durability.IsPermanent(err) {
		t.Fatalf("PersistEvent after a failed sync, the file back: %v, want the permanent error of the sync", err)
	}
	if got := eventsFrom63(t, s); got != "[kept]" {
		t.Errorf("after a failed sync, the store reads %v from index 63, want [kept]", got)
	}
	s.Close() // fails: its last checkpoint is refused too; the log holds it

	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PersistEvent(ctx, "a", 64, []byte("later")); err != nil {
		t.Fatalf("PersistEvent once the store is opened again: %v", err)
	}
	if got := eventsFrom63(t, s); got != "[kept later]" {
		t.Errorf("opened again, the store holds %v from index 63, want [kept later]", got)
	}
}
