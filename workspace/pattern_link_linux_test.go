//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command can remove a pattern's directory while it is empty
// (config, for config/*.key) and put a link in its place (config ->
// real): what the host then writes through the link (config/a.key,
// with os.WriteFile) is hidden from the next command at its real place
// and through the link, with a sandbox set up ahead (Warm) too.
func TestPatternDirectoryReplacedByLinkHidesWhatHostWrote(t *testing.T) {
	requireSandbox(t)
	for _, warm := range []bool{false, true} {
		dir := t.TempDir()
		mustDo(t, os.Mkdir(filepath.Join(dir, "config"), 0o755))
		ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "config", "*.key")}})
		mustDo(t, err)
		r := runSandboxed(t, ws, "rmdir config && mkdir real && ln -s real config && echo replaced")
		if !strings.Contains(r.Stdout, "replaced") {
			t.Fatalf("the link: %+v", r)
		}
		if warm {
			mustDo(t, ws.Warm(context.Background()))
		}
		mustDo(t, os.WriteFile(filepath.Join(dir, "config", "a.key"), []byte("SECRET-A"), 0o644))
		res := runSandboxed(t, ws, "cat real/a.key config/a.key 2>&1; echo ran")
		if strings.Contains(res.Stdout, "SECRET") || !strings.Contains(res.Stdout, "ran") {
			t.Errorf("warm=%v: a command read what the host wrote through a link at a pattern's directory: %q", warm, res.Stdout)
		}
		mustDo(t, ws.Close())
	}
}
