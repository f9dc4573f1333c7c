//go:build unix

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/durability"
)

// swappableFile opens a store whose file descriptor the test can point at
// another file (as the file system would, remounting it read-only or
// running out of space) and back: it returns the store, its path, and
// swap, which makes the store's descriptor refer to the file at other,
// opened with flag, and returns the function that undoes it. The store's
// file stays open (and locked) meanwhile.
func swappableFile(t *testing.T) (s *Store, path string, swap func(other string, flag int) (undo func())) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "store.db")
	s, file := openWatched(t, path)
	t.Cleanup(func() { s.Close() })
	fd := int(file.Fd())
	return s, path, func(other string, flag int) func() {
		t.Helper()
		saved, err := unix.Dup(fd) // holds the store's file, and its lock
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(other, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Dup2(int(f.Fd()), fd); err != nil {
			t.Fatal(err)
		}
		return func() {
			t.Helper()
			if err := unix.Dup2(saved, fd); err != nil {
				t.Fatal(err)
			}
			unix.Close(saved)
		}
	}
}

// TestFileTurnedReadOnly_WritesFailForGood: once the store's descriptor
// of its file takes no writes, every write fails with a permanent error
// that wraps EBADF and names the file once, and reads go on; a write that
// must grow the file too, though bbolt reports its failed ftruncate as a
// "file resize error" without the errno (EINVAL, for a descriptor open
// read-only).
func TestFileTurnedReadOnly_WritesFailForGood(t *testing.T) {
	ctx := t.Context()
	s, path, swap := swappableFile(t)
	if err := s.PersistEvent(ctx, "a", 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	undo := swap(path, os.O_RDONLY)
	defer undo()
	for _, data := range [][]byte{[]byte("lost"), []byte("lost"), make([]byte, 1<<20)} {
		err := s.PersistEvent(ctx, "a", 1, data)
		if !errors.Is(err, syscall.EBADF) || !durability.IsPermanent(err) || strings.Count(fmt.Sprint(err), path) != 1 ||
			!strings.Contains(fmt.Sprint(err), "can no longer be written") {
			t.Fatalf("PersistEvent of %d bytes once the file takes no writes: %v, want a permanent error wrapping EBADF that names the file once", len(data), err)
		}
	}
	if got := events(t, s, 0); got != "[kept]" {
		t.Errorf("the store holds %v, want [kept]", got)
	}
}

// TestCompact_ProbesTheNewFile: after Compact, a failure to grow the file
// is explained by the descriptor of the file the store now writes, open
// for writing, not by the old one, closed.
func TestCompact_ProbesTheNewFile(t *testing.T) {
	ctx := t.Context()
	s, _ := openTemp(t, nil)
	defer s.Close()
	if err := s.PersistEvent(ctx, "a", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if err := descriptorFailure(s.file); err != nil {
		t.Errorf("after Compact, the store's descriptor: %v, want one open for writing", err)
	}
	if err := s.PersistEvent(ctx, "a", 1, make([]byte, 1<<20)); err != nil {
		t.Errorf("a write that grows the compacted file: %v", err)
	}
}
