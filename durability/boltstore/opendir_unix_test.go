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
)

// TestOpen_ExistingFileSyncsItsFolder: Open of an existing file syncs
// its folder, as the creation of a new one does: a store created by a
// process that crashed before that sync may have a directory entry that
// is not yet on disk, and the writes of the process that opens it next
// would be lost with it. A read-only Open, or one with NoSync, does not;
// a folder that cannot be synced fails Open, naming the store.
func TestOpen_ExistingFileSyncsItsFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	dir := filepath.Dir(path)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// opened opens path with opts, and returns the folder's opens (a
	// sync of it) and Open's error; failDir makes them fail.
	opened := func(opts *Options, failDir error) (int, error) {
		var dirOpens int
		s, err := open(t.Context(), path, opts, func(name string, flag int, mode os.FileMode) (*os.File, error) {
			if name == dir {
				dirOpens++
				if failDir != nil {
					return nil, &os.PathError{Op: "open", Path: name, Err: failDir}
				}
			}
			return os.OpenFile(name, flag, mode)
		})
		if err == nil {
			if cerr := s.Close(); cerr != nil {
				t.Fatal(cerr)
			}
		}
		return dirOpens, err
	}
	for _, c := range []struct {
		name string
		opts *Options
		want int
	}{{"writable", nil, 1}, {"read-only", &Options{ReadOnly: true}, 0}, {"NoSync", &Options{NoSync: true}, 0}} {
		if n, err := opened(c.opts, nil); err != nil || n != c.want {
			t.Errorf("%s Open of an existing file: %v, the folder synced %d times; want %d", c.name, err, n, c.want)
		}
	}
	_, err = opened(nil, syscall.EIO)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(fmt.Sprint(err), path) {
		t.Errorf("Open of an existing file whose folder cannot be synced: %v; want an error wrapping EIO naming the store", err)
	}
}
