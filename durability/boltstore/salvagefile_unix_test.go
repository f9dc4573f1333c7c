//go:build unix

package boltstore

import (
	"os"
	"path/filepath"
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
