package tooltest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/polyweave/polyweave-go/tools/tooltest"
)

const tempChildEnv = "POLYWEAVE_TOOLTEST_TEMP_CHILD"

// TestTempChild is the child of TestStartChild_RemovesChildTemp; it does
// nothing unless started by it. It makes a temporary folder and a file in
// it, marks the folder, and exits without running its cleanups, as a
// child that is killed, or that exits to keep the testing package from
// judging its data races, does.
func TestTempChild(t *testing.T) {
	if os.Getenv(tempChildEnv) == "" {
		return
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "left"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tooltest.Marker()("%s", dir)
	os.Exit(0)
}

// TestStartChild_RemovesChildTemp: what a child leaves in its temporary
// folders is gone once the test that started it has ended, even when the
// child never ran its cleanups.
func TestStartChild_RemovesChildTemp(t *testing.T) {
	var dir string
	t.Run("parent", func(t *testing.T) {
		c := tooltest.StartChild(t, "^TestTempChild$", tempChildEnv+"=1")
		dir = c.Mark(t)
		c.Wait(t)
		if _, err := os.Stat(filepath.Join(dir, "left")); err != nil {
			t.Fatalf("the child's file, while the parent runs: %v", err)
		}
	})
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the child's temporary folder %s after the parent ended: %v, want it gone", dir, err)
	}
}
