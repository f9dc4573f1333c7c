//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linkAtPatternDirCase: with config/*.key to hide, a command replaces
// the empty config with a link (made by link), the host writes
// config/a.key through it, and the next command must read it neither
// through the link nor where it landed (read).
func linkAtPatternDirCase(t *testing.T, link, read string) {
	requireSandbox(t)
	dir := t.TempDir()
	mustDo(t, os.Mkdir(filepath.Join(dir, "config"), 0o755))
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "config", "*.key")}})
	mustDo(t, err)
	defer ws.Close()
	r := runSandboxed(t, ws, "rmdir config && "+link+" && echo replaced")
	if !strings.Contains(r.Stdout, "replaced") {
		t.Fatalf("the link: %+v", r)
	}
	mustDo(t, os.WriteFile(filepath.Join(dir, "config", "a.key"), []byte("SECRET-A"), 0o644))
	res := runSandboxed(t, ws, "cat "+read+" config/a.key 2>&1; echo ran")
	if strings.Contains(res.Stdout, "SECRET") || !strings.Contains(res.Stdout, "ran") {
		t.Errorf("%s: a command read what the host wrote through the link: %q", link, res.Stdout)
	}
}

func TestPatternDirLinkThroughTwoLinks(t *testing.T) {
	linkAtPatternDirCase(t, "mkdir real && ln -s real a && ln -s a config", "real/a.key a/a.key")
}

func TestPatternDirLinkAbsolute(t *testing.T) {
	linkAtPatternDirCase(t, "mkdir real && ln -s \"$PWD/real\" config", "real/a.key")
}

func TestPatternDirLinkToWorkspaceItself(t *testing.T) {
	linkAtPatternDirCase(t, "ln -s . config", "a.key")
}

func TestPatternDirLinkToWorkspaceViaDotDot(t *testing.T) {
	linkAtPatternDirCase(t, "mkdir sub && ln -s sub/.. config", "a.key")
}
