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

// resolvedConfig is the default Config hiding hide, resolved around the
// workspace dir as a workspace resolves it when it is opened.
func resolvedConfig(t *testing.T, dir string, hide ...string) Config {
	t.Helper()
	cfg := defaults(t, Config{Hide: hide})
	var err error
	if cfg.Resolved, err = ResolveHide(cfg.Hide, dir); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// workspaceOutsideTmp is a new directory, removed after the test, not
// beneath /tmp: there the sandbox finds the paths to hide in the
// workspace before mounting it, through the host's view of it (beneath
// /tmp, which the sandbox covers with its own, it looks again once the
// workspace is mounted: see TestHiddenPathMadeLaterInTmpWorkspace).
func workspaceOutsideTmp(t *testing.T) string {
	t.Helper()
	if d := t.TempDir(); d != "/tmp" && !strings.HasPrefix(d, "/tmp/") {
		return d
	}
	d, err := os.MkdirTemp("/var/tmp", "pw-test-")
	if err != nil {
		t.Fatalf("a directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// A hidden link stays hidden as what it led to when the workspace was
// opened: a command that points the link elsewhere does not make the
// next command's sandbox hide the new target instead.
func TestHiddenLinkRetargeted(t *testing.T) {
	dir := workspaceOutsideTmp(t)
	if err := os.Mkdir(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "conf.d", "secret.conf")
	if err := os.WriteFile(secret, []byte("DB-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "dbconf")); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "dbconf"))

	out, exit := runIn(t, cfg, dir, "cat conf.d/secret.conf; rm dbconf && ln -s /etc/hostname dbconf")
	if exit.Code != 0 || strings.Contains(out, "DB-SECRET") {
		t.Fatalf("first command: %q, %+v", out, exit)
	}
	out, _ = runIn(t, cfg, dir, "cat conf.d/secret.conf")
	if strings.Contains(out, "DB-SECRET") {
		t.Errorf("the hidden file is visible once a command re-pointed the link to it: %q", out)
	}
}

// A hidden directory in the workspace that a command renames away (and
// replaces) is not shown under its new name to the next command: its
// sandbox refuses to run it.
func TestHiddenDirMoved(t *testing.T) {
	dir := workspaceOutsideTmp(t)
	private := filepath.Join(dir, "cfg", "private")
	if err := os.MkdirAll(private, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "key.txt"), []byte("PRIVATE-KEY"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, dir, private)

	out, exit := runIn(t, cfg, dir, "cat cfg/private/key.txt; mv cfg cfg2 && mkdir -p cfg/private")
	if exit.Code != 0 || strings.Contains(out, "PRIVATE-KEY") {
		t.Fatalf("first command: %q, %+v", out, exit)
	}
	refusedMoved(t, cfg, dir, "cat cfg2/private/key.txt")
}

// refusedMoved starts command in a sandbox of cfg around dir and fails
// the test unless the set-up refuses it with [ErrHiddenMoved].
func refusedMoved(t *testing.T, cfg Config, dir, command string) {
	t.Helper()
	root, null := openRootAndNull(t, dir)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Start(cfg, root, "/bin/sh", command, nil, outW, null)
	outW.Close()
	if err == nil {
		_, _ = p.Finish()
		_ = p.Cmd.Wait()
		b, _ := io.ReadAll(outR)
		t.Fatalf("a command ran after a hidden path was moved (it printed %q)", b)
	}
	if !errors.Is(err, ErrHiddenMoved) {
		t.Errorf("the refusal does not say why (errors.Is ErrHiddenMoved): %v", err)
	}
	t.Log(err)
}

// A Config with Hide it was not given resolved is refused: resolving it
// at each set-up is what commands could exploit.
func TestHideUnresolvedRefused(t *testing.T) {
	dir := t.TempDir()
	root, null := openRootAndNull(t, dir)
	_, err := Prepare(defaults(t, Config{Hide: []string{filepath.Join(dir, "x")}}), root, null, null)
	if !errors.Is(err, ErrConfig) {
		t.Errorf("Prepare with Hide unresolved: %v, want ErrConfig", err)
	}
}

// A path to hide in the workspace that does not exist when the
// workspace is opened is hidden once it does, in a workspace beneath
// /tmp too (the sandbox's /tmp, a tmpfs of its own, does not hold the
// workspace until the workspace is mounted on it).
func TestHiddenPathMadeLaterInTmpWorkspace(t *testing.T) {
	dir := dirIn(t, "/tmp")
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "later"), filepath.Join(dir, "later.txt"))
	for _, hp := range cfg.Resolved {
		if hp.Dev != 0 || hp.Ino != 0 {
			t.Fatalf("%s exists before the test made it", hp.Path)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"later/key", "later.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("LATE-SECRET"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "visible"), []byte("VISIBLE"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runIn(t, cfg, dir, "cat later/key later.txt visible")
	if strings.Contains(out, "LATE-SECRET") {
		t.Errorf("a path to hide made after the workspace was opened is visible: %q", out)
	}
	if !strings.Contains(out, "VISIBLE") {
		t.Errorf("the rest of the workspace is not visible: %q", out)
	}
}

// dirIn is a new directory in parent, removed after the test. A
// workspace in /tmp has the sandbox's own /tmp for its surroundings:
// the rest of the host, /var/tmp among it, stays visible.
func dirIn(t *testing.T, parent string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, "pw-test-")
	if err != nil {
		t.Fatalf("a directory in %s: %v", parent, err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// writeFiles writes each name (a path) with its content.
func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A pattern among the paths to hide is matched again by each sandbox:
// a path that matches it only after the workspace was opened is hidden
// too, whether the pattern matched something then or nothing, in the
// workspace (beneath /tmp or not) and outside it.
func TestHidePatternMatchedLater(t *testing.T) {
	for _, parent := range []string{"/tmp", "/var/tmp"} {
		t.Run("workspace in "+parent, func(t *testing.T) {
			dir, outside := dirIn(t, parent), dirIn(t, "/var/tmp")
			if err := os.Mkdir(filepath.Join(dir, "keys"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, map[string]string{filepath.Join(dir, "keys", "old.pem"): "OLD-SECRET"})
			cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.key"), filepath.Join(dir, "keys", "*.pem"),
				filepath.Join(outside, "*.key"))
			writeFiles(t, map[string]string{
				filepath.Join(dir, "late.key"):        "LATE-SECRET",
				filepath.Join(dir, "keys", "new.pem"): "LATE-SECRET",
				filepath.Join(outside, "late.key"):    "LATE-SECRET",
				filepath.Join(dir, "visible"):         "VISIBLE",
			})
			out, _ := runIn(t, cfg, dir, "cat late.key keys/new.pem keys/old.pem "+outside+"/late.key visible")
			if strings.Contains(out, "SECRET") {
				t.Errorf("a path that matches a pattern to hide is visible: %q", out)
			}
			if !strings.Contains(out, "VISIBLE") {
				t.Errorf("the rest of the workspace is not visible: %q", out)
			}
		})
	}
}

// A hidden path outside the workspace that no longer holds what it held
// when the workspace was opened (the host renamed it away, put another
// file in its place by a rename, or a link on the way to it) refuses
// the commands, as one in the workspace does: what it held may now be
// visible under another name. A file rewritten in place is the same
// file, and is hidden still; a path in the host's /tmp outside the
// workspace, which no sandbox shows, is not checked.
func TestHiddenOutsideReplaced(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(keys, key string) error
		refused bool
	}{
		{"rewritten in place", func(_, key string) error {
			return os.WriteFile(key, []byte("NEW-SECRET"), 0o644)
		}, false},
		{"replaced by a rename", func(_, key string) error {
			if err := os.WriteFile(key+".new", []byte("NEW-SECRET"), 0o644); err != nil {
				return err
			}
			return errors.Join(os.Rename(key, key+".old"), os.Rename(key+".new", key))
		}, true},
		{"renamed away", func(_, key string) error { return os.Rename(key, key+".old") }, true},
		{"its directory replaced by a link", func(keys, _ string) error {
			return errors.Join(os.Rename(keys, keys+".old"), os.Symlink(keys+".old", keys))
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := dirIn(t, "/tmp")
			keys := filepath.Join(dirIn(t, "/var/tmp"), "keys")
			if err := os.Mkdir(keys, 0o755); err != nil {
				t.Fatal(err)
			}
			key, inTmp := filepath.Join(keys, "db.key"), filepath.Join(dirIn(t, "/tmp"), "tmp.key")
			writeFiles(t, map[string]string{key: "OLD-SECRET", filepath.Join(keys, "visible"): "VISIBLE", inTmp: "TMP-SECRET"})
			cfg := resolvedConfig(t, dir, key, inTmp)
			cmd := "cat " + key + " " + key + ".old " + keys + "/visible"
			if out, _ := runIn(t, cfg, dir, cmd); strings.Contains(out, "SECRET") || !strings.Contains(out, "VISIBLE") {
				t.Fatalf("before the change: %q", out)
			}
			if err := c.change(keys, key); err != nil {
				t.Fatal(err)
			}
			if c.refused {
				refusedMoved(t, cfg, dir, cmd)
			} else if out, _ := runIn(t, cfg, dir, cmd); strings.Contains(out, "SECRET") || !strings.Contains(out, "VISIBLE") {
				t.Errorf("after the change: %q", out)
			}
		})
	}
}

// A pattern to hide must be absolute, like a path, though it matches
// nothing: it is matched again at each set-up, where a relative one
// would match beside whatever directory the sandbox is in.
func TestHideRelativePatternRefused(t *testing.T) {
	if _, err := ResolveHide([]string{"*.key"}, t.TempDir()); !errors.Is(err, ErrConfig) {
		t.Errorf("ResolveHide of a relative pattern: %v, want ErrConfig", err)
	}
}
