//go:build linux

package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// An undo's restore of a path to hide reaches the directory of what it
// restores as a write does: a command that swaps a directory on the way
// for a link to a directory it sees, after the name was checked, gets
// the restore refused, and the previous content lands nowhere it sees.
func TestRestore_ParentSwappedAfterTheCheck(t *testing.T) {
	fx := newFixture(t, &Options{Sandbox: SandboxOff})
	in := func(name string) string { return filepath.Join(fx.ws.dir, name) }
	fx.ws.sandbox = &sandbox.Config{Resolved: []sandbox.HiddenPath{{Path: in("cfg/.env")}}}
	t.Cleanup(func() { fx.ws.sandbox = nil })
	mustDo(t, os.Mkdir(in("pub"), 0o755))
	mustDo(t, os.Mkdir(in("cfg"), 0o755))
	mustDo(t, os.WriteFile(in("cfg/.env"), []byte("new\n"), 0o600))
	fx.ws.hookAfterCheck = func() {
		mustDo(t, os.RemoveAll(in("cfg")))
		mustDo(t, os.Symlink("pub", in("cfg")))
	}
	err := fx.ws.restore(&writeRecord{Path: "cfg/.env", Existed: true, Perm: 0o600, Prev: []byte("SECRET\n")})
	fx.ws.hookAfterCheck = nil
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("restore of cfg/.env, cfg swapped for a link to pub after the check: %v; want refused for the link", err)
	}
	if err != nil && strings.Contains(err.Error(), fx.ws.dir) {
		t.Errorf("restore's error %q names a host path", err)
	}
	assertNoFiles(t, in("pub"), "restore of cfg/.env, cfg swapped for a link to pub")
}

// assertNoFiles fails t when a file (anything but a directory) is
// beneath dir.
func assertNoFiles(t *testing.T, dir, what string) {
	t.Helper()
	mustDo(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("%s: %s was written, which commands see", what, p)
		}
		return err
	}))
}
