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

// A directory that a pattern's wildcard matched (src for "*/*.pem") is
// pinned too: renamed at the same depth its new name would match "*"
// again, but moved deeper ("x/src/test.pem") it would match the
// pattern no more, and the next sandbox would show what it holds.
func TestHiddenMatchWildcardDirectoryMovedDeeper(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*", "*.pem"))
	writeFiles(t, dir, "src/test.pem")
	out, _ := runIn(t, cfg, dir, "mkdir x; mv src x/src; mv src/test.pem x/; cat src/test.pem x/src/test.pem x/test.pem")
	if strings.Contains(out, "SECRET") {
		t.Fatalf("the command that moved it read the hidden file: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "cat src/test.pem x/src/test.pem x/test.pem")
	if strings.Contains(out, "SECRET") {
		t.Errorf("a command read the hidden file once a command moved its directory deeper: %q", out)
	}
}

// A sandbox prepared ahead does not run a command that could see a
// path to hide that appeared, or was replaced, after it was set up:
// Run refuses ([ErrPreparedStale]) and the command never starts; a
// sandbox prepared afterwards hides the path and runs it.
func TestPreparedSandboxRefusesWhenHiddenPathChanged(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"literal made", func(t *testing.T, dir string) { writeFiles(t, dir, "later.txt") }},
		{"pattern matched", func(t *testing.T, dir string) { writeFiles(t, dir, "new.pem") }},
		{"replaced", func(t *testing.T, dir string) {
			// As write_file does: a new file renamed over the old one.
			writeFiles(t, dir, "tmp-key")
			if err := os.Rename(filepath.Join(dir, "tmp-key"), filepath.Join(dir, "key.pem")); err != nil {
				t.Fatal(err)
			}
		}},
		{"relinked", func(t *testing.T, dir string) {
			// The same file taken away and put back (its inode, its
			// content): the prepared sandbox's cover went with the old
			// name, as it does when a file system gives a new file the
			// inode number just freed. The name that held it goes
			// too: a file to hide with another link is refused
			// (ErrHiddenLinked).
			held := filepath.Join(t.TempDir(), "held")
			key := filepath.Join(dir, "key.pem")
			for _, step := range []func() error{
				func() error { return os.Link(key, held) },
				func() error { return os.Remove(key) },
				func() error { return os.Link(held, key) },
				func() error { return os.Remove(held) },
			} {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, "key.pem")
			cfg := resolvedConfig(t, dir, filepath.Join(dir, "later.txt"), filepath.Join(dir, "*.pem"))
			root, _ := openRootAndNull(t, dir)
			p, outR := preparedFor(t, cfg, root)
			c.change(t, dir)
			err := p.Run("/bin/sh", "cat later.txt new.pem key.pem; echo ran", nil)
			if err == nil {
				_, _ = p.Finish()
				b, _ := io.ReadAll(outR)
				t.Fatalf("the prepared sandbox ran its command (it printed %q)", b)
			}
			if !errors.Is(err, ErrPreparedStale) {
				t.Errorf("the refusal does not say why (errors.Is ErrPreparedStale): %v", err)
			}
			p.Release()
			if b, _ := io.ReadAll(outR); len(b) > 0 {
				t.Errorf("the refused command printed %q", b)
			}
			if c.name == "replaced" {
				return // a fresh sandbox refuses too: ErrHiddenMoved (see TestHiddenDirMoved)
			}
			out, exit := runIn(t, cfg, dir, "cat later.txt new.pem key.pem; echo ran")
			if strings.Contains(out, "SECRET") || !strings.Contains(out, "ran") || exit.Code != 0 {
				t.Errorf("a sandbox set up afterwards: %q, %+v", out, exit)
			}
		})
	}
}
