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

// A hidden file in the workspace with another name (a hard link made
// from outside the sandboxes: ln .env notes.txt) refuses the set-up,
// which covers one name only: the command never runs, and the error
// names the path, says why in the workspace's terms, and what to do.
// An exact path and a pattern's match alike; once the other name is
// removed, commands run and the file stays hidden.
func TestHiddenFileWithAnotherLinkRefused(t *testing.T) {
	for _, dir := range []string{t.TempDir(), workspaceOutsideTmp(t)} {
		writeFiles(t, dir, ".env", "sec/a.pem")
		cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"), filepath.Join(dir, "sec", "*.pem"))
		for _, c := range []struct{ hidden, other string }{{".env", "notes.txt"}, {"sec/a.pem", "copy.txt"}} {
			other := filepath.Join(dir, c.other)
			if err := os.Link(filepath.Join(dir, c.hidden), other); err != nil {
				t.Fatal(err)
			}
			out, err := runShell(cfg, dir, "/bin/sh", "cat "+c.other+"; echo ran")
			if strings.Contains(out, "SECRET") || strings.Contains(out, "ran") {
				t.Errorf("%s: a command ran with %s, a hard link of it, in view: %q", c.hidden, c.other, out)
			}
			text, ok := InWorkspaceTerms(err)
			if !errors.Is(err, ErrHiddenLinked) || !strings.Contains(err.Error(), filepath.Join(dir, c.hidden)) ||
				!ok || !strings.Contains(text, c.hidden+" (in the workspace)") || strings.Contains(text, dir) ||
				!strings.Contains(text, "hard link") {
				t.Errorf("%s with another link: %v (in the workspace's terms %q); want ErrHiddenLinked, "+
					"naming the path, in the workspace's terms without the host's", c.hidden, err, text)
			}
			if err := os.Remove(other); err != nil {
				t.Fatal(err)
			}
			out, err = runShell(cfg, dir, "/bin/sh", "cat "+c.hidden+"; echo ran")
			if err != nil || strings.Contains(out, "SECRET") || !strings.Contains(out, "ran") {
				t.Errorf("%s, its other link removed: %q, %v; want the command run, the file hidden", c.hidden, out, err)
			}
		}
	}
}

// A hard link made to a hidden file after its sandbox was prepared,
// before the command is handed to it, is found by Run's check: the
// command does not run there (ErrPreparedStale), and a new set-up
// refuses it (ErrHiddenLinked).
func TestPreparedHiddenFileLinkedSinceIsStale(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, ".env")
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	root, _ := openRootAndNull(t, dir)
	p, outR := preparedFor(t, cfg, root)
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := p.Run("/bin/sh", "cat notes.txt; echo ran", []string{"PATH=/usr/bin:/bin"}); err == nil {
		_, _ = p.Finish()
		b, _ := io.ReadAll(outR)
		t.Fatalf("a prepared sandbox ran its command with a hidden file's new hard link in view: %q", b)
	} else if !errors.Is(err, ErrPreparedStale) || !errors.Is(err, ErrHiddenLinked) {
		t.Errorf("Run with a hidden file linked since the set-up: %v; want ErrPreparedStale and ErrHiddenLinked", err)
	}
	if _, err := runShell(cfg, dir, "/bin/sh", "echo ran"); !errors.Is(err, ErrHiddenLinked) {
		t.Errorf("a new set-up with the link there: %v; want ErrHiddenLinked", err)
	}
}
