//go:build unix

package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// TestCompact_FolderSyncFails_NoWriteLost: Compact renames its copy over
// the store's file, then syncs the folder. When that sync fails (here the
// folder cannot be opened: the process is out of descriptors), the copy is
// the file at the store's path: the store reads and writes it from then
// on, never the old file, which is unlinked. The rename may not survive a
// crash, so Compact fails with a permanent error naming the file once, and
// every later write fails with it rather than being acknowledged and then
// lost; reads go on. Opened again, the store holds every acknowledged
// write and takes new ones.
func TestCompact_FolderSyncFails_NoWriteLost(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.db")
	h := hookedStore(t, path, nil)
	defer h.Close()
	if err := h.PersistEvent(ctx, "a", 0, []byte("before")); err != nil {
		t.Fatal(err)
	}
	h.before = func(name string) error {
		if name == dir {
			return &fs.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
		}
		return nil
	}
	_, err := h.Compact(ctx)
	if !errors.Is(err, syscall.EMFILE) || !durability.IsPermanent(err) || strings.Count(fmt.Sprint(err), path) != 1 {
		t.Fatalf("Compact whose folder sync fails: %v, want a permanent error wrapping EMFILE that names the file once", err)
	}
	h.before = nil
	noCompactCopies(t, path)
	if fi, err := h.Store.file.Stat(); err != nil {
		t.Fatal(err)
	} else if at, err := os.Stat(path); err != nil || !os.SameFile(fi, at) {
		t.Errorf("after Compact renamed its copy over the file, the store's descriptor is not of the file at its path (%v)", err)
	}
	if err := h.PersistEvent(ctx, "a", 1, []byte("after")); !errors.Is(err, syscall.EMFILE) || !durability.IsPermanent(err) {
		t.Fatalf("PersistEvent after the folder sync failed: %v, want Compact's permanent error", err)
	}
	if got := readEvents(t, h.Store, "a"); got != "[before]" {
		t.Errorf("the store reads %v, want [before]", got)
	}
	h.Close()

	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := readEvents(t, s, "a"); got != "[before]" {
		t.Errorf("opened again, the store holds %v, want [before]", got)
	}
	if err := s.PersistEvent(ctx, "a", 1, []byte("after")); err != nil {
		t.Fatalf("PersistEvent once the store is opened again: %v", err)
	}
	if got := readEvents(t, s, "a"); got != "[before after]" {
		t.Errorf("opened again, the store holds %v, want [before after]", got)
	}
}
