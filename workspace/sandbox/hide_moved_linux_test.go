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

// tryIn runs command with /bin/sh in a sandbox of cfg on root and returns
// what it printed, or the error of its set-up.
func tryIn(t *testing.T, cfg Config, root *os.File, command string) (string, error) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Start(defaults(t, cfg), root, "/bin/sh", command, []string{"PATH=/usr/bin:/bin"}, outW, outW)
	outW.Close()
	if err != nil {
		return "", err
	}
	out, _ := io.ReadAll(outR)
	_, err = p.Finish()
	_ = p.Cmd.Wait()
	return string(out), err
}

// A command running beside others (a workspace is safe for concurrent
// use) that renames a directory back and forth does not make another
// command's set-up leave what a pattern matched in it visible: a set-up
// that matched a path and finds it gone when it hides it refuses to run
// its command (ErrHiddenMoved).
func TestHidePatternConcurrentRename(t *testing.T) {
	dir := dirIn(t, "/var/tmp")
	if err := os.Mkdir(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*", "*.env"))
	writeFiles(t, map[string]string{filepath.Join(dir, "app", "db.env"): "LATE-SECRET"})
	root, null := openRootAndNull(t, dir)
	flip, err := Start(defaults(t, cfg), root, "/bin/sh", `while :; do mv app x; mv x app; done`,
		[]string{"PATH=/usr/bin:/bin"}, null, null)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { flip.Terminate(); _, _ = flip.Finish(); _ = flip.Cmd.Wait() }()
	refused := 0
	for i := range 100 {
		// Whether the set-up covered the file, whatever its name as the
		// command runs.
		out, err := tryIn(t, cfg, root, `grep -c '/db\.env ' /proc/self/mountinfo`)
		switch {
		case errors.Is(err, ErrHiddenMoved):
			refused++
		case err != nil:
			t.Fatalf("try %d: %v", i, err)
		case strings.TrimSpace(out) != "1":
			t.Fatalf("try %d: a set-up while another command renamed the directory left the file uncovered: %q", i, out)
		}
	}
	t.Logf("%d set-ups of 100 refused", refused)
}

// RecordMatches adds the identities of what the patterns and missing
// paths lead to in the workspace, not through links there, nor outside
// it, once each, and at most MaxRecorded of them over its calls.
func TestRecordMatchesBounded(t *testing.T) {
	dir, outside := dirIn(t, "/var/tmp"), dirIn(t, "/var/tmp")
	resolved, err := ResolveHide([]string{filepath.Join(dir, "*.key"), filepath.Join(dir, "later"),
		filepath.Join(outside, "*.key")}, dir)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, map[string]string{filepath.Join(dir, "src"): "S", filepath.Join(outside, "o.key"): "S",
		filepath.Join(dir, "later"): "S"})
	if err := os.Symlink(filepath.Join(outside, "o.key"), filepath.Join(dir, "link.key")); err != nil {
		t.Fatal(err)
	}
	mkkeys := func(from, to int) {
		for i := from; i < to; i++ {
			if err := os.Link(filepath.Join(dir, "src"), filepath.Join(dir, fmt.Sprintf("%d.key", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	recorded := func(got []HiddenPath) int {
		n := 0
		for _, h := range got {
			if !h.Recorded {
				continue
			}
			n++
			if h.Dev == 0 && h.Ino == 0 || !within(h.Path, dir) || strings.HasSuffix(h.Path, "link.key") {
				t.Errorf("recorded %+v", h)
			}
		}
		return n
	}
	mkkeys(0, 1000)
	got := RecordMatches(resolved, dir)
	if n := recorded(got); n != 1001 {
		t.Errorf("%d recorded, want 1001 (1000 keys and later)", n)
	}
	if again := RecordMatches(got, dir); len(again) != len(got) {
		t.Errorf("recording again added %d", len(again)-len(got))
	}
	for i := range 1000 {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("%d.key", i))); err != nil {
			t.Fatal(err)
		}
	}
	mkkeys(1000, 1100)
	if n := recorded(RecordMatches(got, dir)); n != MaxRecorded {
		t.Errorf("%d recorded, want %d", n, MaxRecorded)
	}
}

// Nested workspaces: the outer one's commands make links where the
// inner one's set-up follows them (outside the inner workspace). A link
// an outer command made that leads to "/", to a system directory, or
// to the inner workspace or one of its ancestors leads nowhere for the
// inner set-up: it neither fails nor hides /usr/bin.
func TestHideNestedWorkspaceLinks(t *testing.T) {
	outer := dirIn(t, "/var/tmp")
	inner := filepath.Join(outer, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, inner, filepath.Join(outer, "*.key"), filepath.Join(outer, "later"),
		filepath.Join(outer, "up"), filepath.Join(outer, "sys"))
	if out, exit := runIn(t, Config{}, outer, "ln -s /usr/bin bin.key && ln -s / later && ln -s . up && ln -s /usr/lib sys"); exit.Code != 0 {
		t.Fatalf("outer command: %q %+v", out, exit)
	}
	root, _ := openRootAndNull(t, inner)
	out, err := tryIn(t, cfg, root, "ls /usr/bin/env && ls / >/dev/null && ls -d /usr/lib && echo ran")
	if err != nil || out != "/usr/bin/env\n/usr/lib\nran\n" {
		t.Errorf("inner command after an outer command made links: %q, %v", out, err)
	}
}
