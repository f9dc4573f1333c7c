//go:build unix

package boltstore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSalvageFile_KeepsThePermissions: the new file has the file's
// permission bits, no more and no fewer, whatever the umask, so that the
// service that opened the file opens the new one when the same user
// salvages it.
func TestSalvageFile_KeepsThePermissions(t *testing.T) {
	path, _ := pagesFile(t, true)
	for _, perm := range []os.FileMode{0o640, 0o400, 0o666} {
		if err := os.Chmod(path, perm); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "salvaged.db")
		if _, err := SalvageFile(t.Context(), path, dst, &Options{NoSync: true}); err != nil {
			t.Fatalf("%v: %v", perm, err)
		}
		fi, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != perm {
			t.Errorf("file %v: new file %v, want %v", perm, fi.Mode().Perm(), perm)
		}
	}
}

// TestSalvageFile_FolderSyncFails: when the sync of the new file's folder
// fails after the link (here the folder cannot be opened: the process is
// out of descriptors), the new file might not survive a crash; SalvageFile
// fails, as it says, with nothing left at the new file nor next to it,
// and the file unchanged.
func TestSalvageFile_FolderSyncFails(t *testing.T) {
	path, _ := pagesFile(t, true)
	zeroBigActorPage(t, path)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "salvaged.db")
	salvageOpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if name == dir {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
		}
		return os.OpenFile(name, flag, perm)
	}
	defer func() { salvageOpenFile = os.OpenFile }()
	fsv, err := SalvageFile(t.Context(), path, dst, nil)
	if !errors.Is(err, syscall.EMFILE) || fsv != nil || !strings.Contains(err.Error(), dst) || strings.Contains(err.Error(), ".salvaging-") {
		t.Errorf("SalvageFile whose folder sync fails: %v %+v, want an error wrapping EMFILE naming %s", err, fsv, dst)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		t.Errorf("left in the new file's folder: %v %v", left, err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, orig) {
		t.Errorf("SalvageFile changed the file (%v)", err)
	}
}

// TestSalvageFile_CopyNotCreated: when the copy next to the new file
// cannot be created (here its name, longer than the new file's, is too
// long for the file system), the error names the new file, not the copy.
func TestSalvageFile_CopyNotCreated(t *testing.T) {
	path, _ := pagesFile(t, true)
	dir := t.TempDir()
	dst := filepath.Join(dir, strings.Repeat("n", 250))
	fsv, err := SalvageFile(t.Context(), path, dst, &Options{NoSync: true})
	if !errors.Is(err, syscall.ENAMETOOLONG) || fsv != nil || !strings.Contains(err.Error(), dst) || strings.Contains(err.Error(), ".salvaging-") {
		t.Errorf("SalvageFile: %v %+v, want an error wrapping ENAMETOOLONG naming %s, not the copy", err, fsv, dst)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		t.Errorf("left in the new file's folder: %v %v", left, err)
	}
}
