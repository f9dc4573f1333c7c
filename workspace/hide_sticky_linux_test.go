//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// the workspace-level form of the sandbox finding. A command
// replaces config (for config/*.key) by a link config -> real; the host
// writes config/a.key (at real/a.key); the next command cannot read it
// (the set-up follows the link) but removes the link, which is no mount
// point; the command after that reads real/a.key.
func TestPatternDirectoryLinkRemovedKeepsWhatHostWroteHidden(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "config"), 0o755))
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "config", "*.key")}})
	mustDo(t, err)
	defer ws.Close()
	r := runSandboxed(t, ws, "rmdir config && mkdir real && ln -s real config && echo replaced")
	if !strings.Contains(r.Stdout, "replaced") {
		t.Fatalf("the link: %+v", r)
	}
	mustDo(t, os.WriteFile(filepath.Join(dir, "config", "a.key"), []byte("SECRET-A"), 0o644))
	r = runSandboxed(t, ws, "cat real/a.key 2>&1; rm config && mkdir config && echo removed")
	if strings.Contains(r.Stdout, "SECRET") || !strings.Contains(r.Stdout, "removed") {
		t.Fatalf("the second command: %q", r.Stdout)
	}
	r = runSandboxed(t, ws, "cat real/a.key 2>&1; echo ran")
	if strings.Contains(r.Stdout, "SECRET") {
		t.Errorf("a command read what the host wrote through a link at a pattern's directory once the link was removed: %q", r.Stdout)
	}
}
