//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A path to hide that holds the workspace, or a pattern's match that
// does, hides everything in it but the workspace (and the directories
// on the way to it), beneath /tmp too, where the sandbox's own /tmp
// already covers the host's: the set-up succeeds, a command sees the
// workspace and none of its neighbours, and cannot write beside it.
func TestHiddenAncestorOfWorkspace(t *testing.T) {
	inTmp, err := os.MkdirTemp("/tmp", "pw-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(inTmp) })
	for _, base := range []string{inTmp, dirOutsideTmp(t)} {
		ws := filepath.Join(base, "a", "ws")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, base, "sibling.txt", "a/sibling.txt")
		if err := os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("MINE"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := resolvedConfig(t, ws, base, filepath.Join(base, "[a]"))
		out, exit := runIn(t, cfg, ws, "cat mine.txt ../sibling.txt ../../sibling.txt "+base+"/sibling.txt; ls -A .. ../..; "+
			"echo x > ../x")
		if strings.Contains(out, "SECRET") || strings.Contains(out, "sibling.txt\n") {
			t.Errorf("%s: a neighbour of the workspace in the hidden %s is visible: %q", ws, base, out)
		}
		if !strings.Contains(out, "MINE") {
			t.Errorf("%s: the workspace is not visible in the hidden %s: %q %+v", ws, base, out, exit)
		}
		if _, err := os.Stat(filepath.Join(base, "a", "x")); err == nil {
			t.Errorf("%s: the command wrote beside its workspace", ws)
		}
	}
}
