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

// A hidden directory in the workspace that is renamed away (and
// replaced) from outside its sandboxes (by a command of a workspace
// that holds this one, say: this one's commands cannot, see
// TestHiddenPathMadeLaterParentRenamed) is not shown under its new
// name to the next command: its sandbox refuses to run it.
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

	out, _ := runIn(t, cfg, dir, "cat cfg/private/key.txt")
	if strings.Contains(out, "PRIVATE-KEY") {
		t.Fatalf("first command: %q", out)
	}
	if err := os.Rename(filepath.Join(dir, "cfg"), filepath.Join(dir, "cfg2")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(private, 0o755); err != nil {
		t.Fatal(err)
	}
	root, null := openRootAndNull(t, dir)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Start(cfg, root, "/bin/sh", "cat cfg2/private/key.txt", nil, outW, null)
	outW.Close()
	if err == nil {
		_, _ = p.Finish()
		_ = p.Cmd.Wait()
		b, _ := io.ReadAll(outR)
		t.Fatalf("a command ran after the hidden directory was moved (it printed %q)", b)
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
	dir, err := os.MkdirTemp("/tmp", "pw-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
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

// A path to hide that did not exist when the workspace was opened, and
// that a command then makes a link, is not followed by later set-ups:
// not to "/" or the workspace (which would refuse every later command
// for a bad configuration), nor to a system directory (which would hide
// it from every later command), in a workspace beneath /tmp or not.
func TestHiddenPathMadeLaterALink(t *testing.T) {
	for _, dir := range []string{t.TempDir(), workspaceOutsideTmp(t)} {
		for _, to := range []string{"/", dir, "/usr/bin", "../" + filepath.Base(dir)} {
			later := filepath.Join(dir, "later")
			cfg := resolvedConfig(t, dir, later)
			if _, exit := runIn(t, cfg, dir, "ln -s "+to+" later"); exit.Code != 0 {
				t.Fatalf("ln: %+v", exit)
			}
			out, _ := runIn(t, cfg, dir, "ls /usr/bin/env && echo ran")
			if out != "/usr/bin/env\nran\n" {
				t.Errorf("workspace %s, later -> %s: the next command: %q", dir, to, out)
			}
			if err := os.Remove(later); err != nil {
				t.Fatal(err)
			}
		}
	}
}
