//go:build linux

package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Run's check takes a mount root for a cover only when the set-up
// mounted it to hide a path. A directory of the workspace pinned at
// the set-up (on the way to a hidden match) and renamed by the host
// before Run to a name a pattern matches (d1 -> d1.dir, for *.dir) is
// a mount root in the prepared sandbox, its pin's, not a cover: Run
// refuses the command (ErrPreparedStale) rather than let it read what
// the renamed directory holds.
func TestPreparedPinnedDirectoryRenamedToMatchIsStale(t *testing.T) {
	for _, dir := range []string{t.TempDir(), workspaceOutsideTmp(t)} {
		cfg := resolvedConfig(t, dir, filepath.Join(dir, "*", "secret.txt"), filepath.Join(dir, "*.dir"))
		writeFiles(t, dir, "d1/secret.txt", "d1/other.txt")
		root, _ := openRootAndNull(t, dir)
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p, err := Prepare(cfg, root, outW, outW)
		outW.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "d1"), filepath.Join(dir, "d1.dir")); err != nil {
			t.Fatal(err)
		}
		err = p.Run("/bin/sh", "cat d1.dir/other.txt d1.dir/secret.txt; echo ran", nil)
		if err != nil {
			p.Release()
			outR.Close()
			if !errors.Is(err, ErrPreparedStale) {
				t.Errorf("workspace %s: Run refused, but not as stale: %v", dir, err)
			}
			continue
		}
		_, _ = p.Finish()
		b, _ := io.ReadAll(outR)
		outR.Close()
		p.Release()
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("workspace %s: a prepared sandbox showed what a directory renamed to match *.dir holds: %q", dir, b)
		}
	}
}
