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

// A path to hide that appeared after the workspace was opened (a
// literal path missing then, or a pattern's new match) is not shown to
// a later command under another name after a command renamed a
// directory on the way to it: a command cannot rename (or remove)
// such a directory.
func TestHiddenPathMadeLaterParentRenamed(t *testing.T) {
	for _, dir := range []string{t.TempDir(), workspaceOutsideTmp(t)} {
		cfg := resolvedConfig(t, dir, filepath.Join(dir, "sec", "deep", "key"), filepath.Join(dir, "keys", "*.pem"))
		writeFiles(t, dir, "sec/deep/key", "keys/a.pem")
		out, _ := runIn(t, cfg, dir, "mv sec sec2; mv sec/deep sec/deep2; rmdir sec/deep; mv keys keys2; "+
			"cat sec2/deep/key sec/deep2/key keys2/a.pem sec/deep/key keys/a.pem")
		if strings.Contains(out, "SECRET") {
			t.Fatalf("workspace %s: the hidden files are visible to the command that set up: %q", dir, out)
		}
		t.Logf("workspace %s: the renames: %q", dir, out)
		// The directories stay writable, a move out of them a copy.
		out, _ = runIn(t, cfg, dir, "cat sec2/deep/key sec/deep2/key keys2/a.pem; ls sec keys; "+
			"touch sec/deep/new keys/new && mv keys/new sec/deep/new2 && echo wrote")
		if strings.Contains(out, "SECRET") {
			t.Errorf("workspace %s: a hidden file is visible once a command renamed its directory: %q", dir, out)
		}
		if !strings.Contains(out, "deep") || !strings.Contains(out, "a.pem") || !strings.Contains(out, "wrote") {
			t.Errorf("workspace %s: the directories on the way to the hidden files are gone, or not writable: %q", dir, out)
		}
	}
}
