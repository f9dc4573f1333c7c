//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes, in dir, each file named (directories made on the
// way) with the content "SECRET-" and its name.
func writeFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("SECRET-"+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A pattern to hide that matches nothing when the workspace is opened
// hides what matches it once a sandbox is set up: files the host wrote
// afterwards, in a workspace beneath /tmp or not.
func TestHidePatternMatchedLater(t *testing.T) {
	for _, dir := range []string{t.TempDir(), workspaceOutsideTmp(t)} {
		cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.pem"), filepath.Join(dir, "keys", "*"))
		writeFiles(t, dir, "a.pem", "keys/k1", "keys/sub/k2")
		if err := os.WriteFile(filepath.Join(dir, "visible"), []byte("VISIBLE"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := runIn(t, cfg, dir, "cat a.pem keys/k1 keys/sub/k2 visible")
		if strings.Contains(out, "SECRET") {
			t.Errorf("workspace %s: what matches a pattern only after the workspace was opened is visible: %q", dir, out)
		}
		if !strings.Contains(out, "VISIBLE") {
			t.Errorf("workspace %s: the rest of the workspace is not visible: %q", dir, out)
		}
	}
}
