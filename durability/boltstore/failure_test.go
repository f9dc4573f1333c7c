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

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/polyweave/polyweave-go/durability"
)

// TestFileFailure_Permanence: the failures of the file that repeating
// cannot cure (a read-only store, file or file system, a missing
// permission, a closed descriptor) are permanent and name the file; those
// that time or an operator may cure (a full disk or quota, a size limit,
// an I/O error) are not, and stay as they were.
func TestFileFailure_Permanence(t *testing.T) {
	const path = "/data/store.db"
	pathErr := func(errno syscall.Errno) error { return &fs.PathError{Op: "write", Path: path, Err: errno} }
	for _, c := range []struct {
		err       error
		permanent bool
		says      string
	}{
		{bolterrors.ErrDatabaseReadOnly, true, "open read-only"},
		{pathErr(syscall.EROFS), true, "read-only file system"},
		{pathErr(syscall.EACCES), true, "permission"},
		{pathErr(syscall.EPERM), true, "permission"},
		{pathErr(syscall.EBADF), true, "descriptor"},
		{&fs.PathError{Op: "write", Path: path, Err: os.ErrClosed}, true, "descriptor"},
		{bolterrors.ErrDatabaseNotOpen, true, "descriptor"},
		{pathErr(syscall.ENOSPC), false, ""},
		{pathErr(syscall.EDQUOT), false, ""},
		{pathErr(syscall.EFBIG), false, ""},
		{pathErr(syscall.EIO), false, ""},
		{bolterrors.ErrMaxSizeReached, false, ""},
		{fmt.Errorf("file resize error: %s", syscall.ENOSPC), false, ""},
		// bbolt's error for a file it failed to grow keeps the errno's
		// text only: the errno is found again from it.
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: path, Err: syscall.EROFS}), true, "read-only file system"},
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: path, Err: syscall.EACCES}), true, "permission"},
		{fmt.Errorf("file resize error: %s", &fs.PathError{Op: "truncate", Path: path, Err: syscall.EINVAL}), false, ""},
	} {
		got := fileFailure(path, c.err, nil)
		if !errors.Is(got, c.err) {
			t.Errorf("%v: became %v, which does not wrap it", c.err, got)
		}
		if durability.IsPermanent(got) != c.permanent {
			t.Errorf("%v: permanent %v, want %v", c.err, !c.permanent, c.permanent)
		}
		if !c.permanent {
			if got != c.err {
				t.Errorf("%v: changed to %v", c.err, got)
			}
			continue
		}
		if msg := got.Error(); strings.Count(msg, path) != 1 || !strings.Contains(msg, c.says) {
			t.Errorf("%v: %q does not name the file once and say %q", c.err, msg, c.says)
		}
		if again := fileFailure(path, got, nil); again != got {
			t.Errorf("%v: marked twice: %v", c.err, again)
		}
	}
	if fileFailure(path, nil, nil) != nil {
		t.Error("fileFailure of nil is not nil")
	}
}

// TestIsSyncFailure: a failed sync is told from bbolt's other failures:
// os.File.Sync's error, or fdatasync's errno bare (Linux); not a failed
// write, a resize error, or an error marked already.
func TestIsSyncFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "sync", Path: "/d/store.db", Err: syscall.EIO}, true},
		{fmt.Errorf("committing: %w", syscall.EIO), true},
		{&fs.PathError{Op: "write", Path: "/d/store.db", Err: syscall.EIO}, false},
		{fmt.Errorf("file resize error: %s", syscall.EIO), false},
		{durability.Permanent(syscall.EIO), false},
		{bolterrors.ErrMaxSizeReached, false},
		{nil, false},
	} {
		if got := isSyncFailure(c.err); got != c.want {
			t.Errorf("isSyncFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestOpen_NoPermissionIsPermanent: a file the process may not open for
// writing fails Open for good, naming the file.
func TestOpen_NoPermissionIsPermanent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = open(t.Context(), path, nil, func(name string, flag int, _ os.FileMode) (*os.File, error) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	})
	if !errors.Is(err, fs.ErrPermission) || !durability.IsPermanent(err) || !strings.Contains(fmt.Sprint(err), path) {
		t.Errorf("Open of a file it may not write: %v, want a permanent error wrapping fs.ErrPermission that names the file", err)
	}
}

// TestPersistEvents_TooLargeIsPermanent: a batch over the largest write
// the store takes is refused for good (the same data never fits), before
// it is encoded.
func TestPersistEvents_TooLargeIsPermanent(t *testing.T) {
	s, _ := openTemp(t, nil)
	defer s.Close()
	chunk := make([]byte, 1<<20)
	batch := make([][]byte, maxDataSize/len(chunk)+1) // the same MiB, over and over: nothing allocated
	for i := range batch {
		batch[i] = chunk
	}
	err := s.PersistEvents(t.Context(), "a", 0, batch)
	if !errors.Is(err, bolterrors.ErrValueTooLarge) || !durability.IsPermanent(err) {
		t.Errorf("PersistEvents of %d MiB: %v, want a permanent error wrapping ErrValueTooLarge", len(batch), err)
	}
}
