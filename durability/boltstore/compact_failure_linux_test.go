package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/durability"
)

// storeWithRoom returns a store (hooked) whose file has free pages: a
// write reuses them rather than grow the file. Its actor "a" holds events
// 0 to 63 and nothing is pending in its log.
func storeWithRoom(t *testing.T) (*hooked, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		if err := s.PersistEvent(t.Context(), "a", uint64(i), []byte("kept")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return hookedStore(t, path, nil), path
}

// failCommitSync writes event 64 of actor "a" with the store's descriptor
// pointed at /dev/null, which takes writes and fails fdatasync (EINVAL),
// then points it back; the write must fail with the permanent error of a
// failed sync.
func failCommitSync(t *testing.T, h *hooked) {
	t.Helper()
	fd := int(h.file.Fd())
	saved, err := unix.Dup(fd) // holds the file, and its lock
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(int(null.Fd()), fd, 0); err != nil {
		t.Fatal(err)
	}
	null.Close()
	werr := h.PersistEvent(t.Context(), "a", 64, []byte("lost"))
	if err := unix.Dup3(saved, fd, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(saved)
	if !errors.Is(werr, syscall.EINVAL) || !durability.IsPermanent(werr) {
		t.Fatalf("PersistEvent whose sync fails: %v, want the permanent error of a failed sync", werr)
	}
}

// compactRefused checks that Compact of h's store, whose sync failed
// (before it or, through before, while it copies), fails with the
// permanent error of the failed sync and leaves the file at path as it
// was: a store that takes no more writes does not rewrite its file from
// what its mapping shows.
func compactRefused(t *testing.T, h *hooked, path string) {
	t.Helper()
	was, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := h.Compact(t.Context())
	if !errors.Is(cerr, syscall.EINVAL) || !durability.IsPermanent(cerr) || strings.Count(cerr.Error(), path) != 1 {
		t.Errorf("Compact of a store whose sync failed: %v, want the permanent error of the failed sync, naming the file once", cerr)
	}
	if is, err := os.Stat(path); err != nil || !os.SameFile(was, is) {
		t.Errorf("Compact of a store whose sync failed replaced its file (%v)", err)
	}
	noCompactCopies(t, path)
	if got := readEvents(t, h.Store, "a"); strings.Count(got, "kept") != 64 || strings.Contains(got, "lost") {
		t.Errorf("the store reads %v, want the 64 events kept", got)
	}
}

// TestCompact_AfterFailedSync_FailsAtOnce: once a commit's sync failed,
// Compact fails at once, before it copies anything, even with nothing in
// the log to checkpoint.
func TestCompact_AfterFailedSync_FailsAtOnce(t *testing.T) {
	h, path := storeWithRoom(t)
	defer h.Close()
	failCommitSync(t, h)
	copied := false
	h.before = func(name string) error {
		copied = copied || strings.HasPrefix(name, path+".compact-")
		return nil
	}
	compactRefused(t, h, path)
	if copied {
		t.Error("Compact of a store whose sync failed began a copy")
	}
}

// TestCompact_SyncFailsWhileCopying_NoSwitch: a commit's sync that fails
// while Compact copies the buckets (here as the copy is opened) stops
// Compact before its switch.
func TestCompact_SyncFailsWhileCopying_NoSwitch(t *testing.T) {
	h, path := storeWithRoom(t)
	defer h.Close()
	h.before = func(name string) error {
		if strings.HasPrefix(name, path+".compact-") {
			failCommitSync(t, h)
		}
		return nil
	}
	compactRefused(t, h, path)
}
