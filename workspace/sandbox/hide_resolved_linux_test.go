//go:build linux

package sandbox

import (
	"errors"
	"fmt"
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
				filepath.Join(outside, "*.key"), filepath.Join(dir, "*", "*.env"))
			if err := os.Mkdir(filepath.Join(dir, "app"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, map[string]string{
				filepath.Join(dir, "late.key"):        "LATE-SECRET",
				filepath.Join(dir, "keys", "new.pem"): "LATE-SECRET",
				filepath.Join(dir, "app", "db.env"):   "LATE-SECRET",
				filepath.Join(outside, "late.key"):    "LATE-SECRET",
				filepath.Join(dir, "visible"):         "VISIBLE",
			})
			out, _ := runIn(t, cfg, dir, "cat late.key keys/new.pem keys/old.pem app/db.env "+outside+"/late.key visible")
			if strings.Contains(out, "SECRET") {
				t.Errorf("a path that matches a pattern to hide is visible: %q", out)
			}
			if !strings.Contains(out, "VISIBLE") {
				t.Errorf("the rest of the workspace is not visible: %q", out)
			}
		})
	}
}

// A pattern to hide is matched again at each set-up without following
// the links commands made in the workspace: a matching link to "/", to
// the workspace, to a system directory, or a link on the way to a
// match, does not make the next command's set-up fail, nor hide what
// the link leads to from it.
func TestHidePatternLinksNotFollowed(t *testing.T) {
	for _, parent := range []string{"/tmp", "/var/tmp"} {
		dir := dirIn(t, parent)
		cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.key"), filepath.Join(dir, "*", "env"))
		cmd := "ln -s / root.key && ln -s . ws.key && ln -s " + dir + " abs.key && ln -s /usr/bin bin.key && ln -s /usr usr && ln -s /usr/bin/env env.key"
		if out, exit := runIn(t, cfg, dir, cmd); exit.Code != 0 {
			t.Fatalf("workspace in %s: %s: %q, %+v", parent, cmd, out, exit)
		}
		out, _ := runIn(t, cfg, dir, "ls /usr/bin/env && /usr/bin/env true && echo ran")
		if out != "/usr/bin/env\nran\n" {
			t.Errorf("workspace in %s: the next command: %q", parent, out)
		}
	}
}

// Matching the patterns to hide is bounded, whatever commands put in
// the directories they list: past the bound the set-up fails, saying
// why, instead of taking minutes; below it, it hides them all (see
// TestHidePatternEntriesBounded for the entries it reads).
func TestHidePatternBounded(t *testing.T) {
	dir := dirIn(t, "/var/tmp")
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.key"))
	writeFiles(t, map[string]string{filepath.Join(dir, "src"): "SECRET"})
	mkfiles := func(n int, format string) {
		t.Helper()
		for i := range n { // links to one file: quicker to make
			if err := os.Link(filepath.Join(dir, "src"), filepath.Join(dir, fmt.Sprintf(format, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	mkfiles(maxMatches, "%d.key")
	if out, _ := runIn(t, cfg, dir, "cat *.key; echo ran"); out != "ran\n" {
		t.Fatalf("%d matching files: %.200q", maxMatches, out)
	}
	root, null := openRootAndNull(t, dir)
	refused := func(what string) {
		t.Helper()
		p, err := Prepare(cfg, root, null, null)
		if err == nil {
			p.Release()
			t.Fatalf("%s: the set-up did not fail", what)
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "too many paths") {
			t.Errorf("%s: %v, want ErrConfig saying there are too many paths", what, err)
		}
	}
	mkfiles(1, "more-%d.key")
	refused("a match too many")
}

// Matching the patterns to hide reads at most what its budget allows of
// the directories it lists, however many entries they hold, and fails
// past it.
func TestHidePatternEntriesBounded(t *testing.T) {
	dir := dirIn(t, "/var/tmp")
	for i := range 100 {
		writeFiles(t, map[string]string{filepath.Join(dir, fmt.Sprint(i)): ""})
	}
	for _, c := range []struct {
		entries int
		fails   bool
	}{{100, false}, {99, true}} {
		budget := matchBudget{entries: c.entries, matches: maxMatches}
		got, err := matchAtSetUp(filepath.Join(dir, "1?"), "/nonexistent", &budget)
		if failed := errors.Is(err, errTooMany); failed != c.fails || !c.fails && len(got) != 10 {
			t.Errorf("a budget of %d entries for 100: %d matches, %v", c.entries, len(got), err)
		}
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
