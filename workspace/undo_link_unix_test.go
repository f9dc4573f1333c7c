//go:build unix

package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/workspace"
)

// TestJournal_UndoFileReplacedByOutwardLink: a file the session wrote,
// replaced since by a symbolic link leading out of the workspace (what
// a command can do), was changed since: the undo is refused with
// ErrChangedSince naming it (an invalid_arguments result of the undo
// tool, as for any other change), reads nothing outside the root, and
// changes nothing.
func TestJournal_UndoFileReplacedByOutwardLink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("A1"), 0o600); err != nil { // even with the content the session wrote
		t.Fatal(err)
	}
	rt := actorstest.NewRuntime(t, nil)
	_, j := newJournal(t, dir, memstore.New(nil))
	jt := startJournal(t, rt, j)
	jt.write("s1", "c1", "a.txt", "A1")
	if err := os.Remove(filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	_, err := j.Undo(undoCtx(t), "s1", "")
	if !errors.Is(err, workspace.ErrChangedSince) {
		t.Errorf("Undo = %v, want ErrChangedSince: a.txt is now a link out of the workspace", err)
	}
	if content(t, secret) != "A1" {
		t.Errorf("the file outside was changed")
	}
	if fi, err := os.Lstat(filepath.Join(dir, "a.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("a.txt: %v %v, want the link left as it is", fi, err)
	}
}
