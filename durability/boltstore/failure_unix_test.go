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
	var file *os.File
	path = filepath.Join(t.TempDir(), "store.db")
	s, err := open(path, nil, func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
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
// that names the file, and reads go on.
func TestFileTurnedReadOnly_WritesFailForGood(t *testing.T) {
	ctx := t.Context()
	s, path, swap := swappableFile(t)
	if err := s.PersistEvent(ctx, "a", 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	undo := swap(path, os.O_RDONLY)
	defer undo()
	for range 2 {
		err := s.PersistEvent(ctx, "a", 1, []byte("lost"))
		if !errors.Is(err, syscall.EBADF) || !durability.IsPermanent(err) || !strings.Contains(err.Error(), path) {
			t.Fatalf("PersistEvent once the file takes no writes: %v, want a permanent error wrapping EBADF that names the file", err)
		}
	}
	var got []string
	if err := s.GetEvents(ctx, "a", 0, 0, func(_ uint64, d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[kept]" {
		t.Errorf("the store holds %v, want [kept]", got)
	}
}
