//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// makeMatches makes n empty files named f0.pem, f1.pem, … in dir.
func makeMatches(t testing.TB, dir string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".pem"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A set-up hides as many paths as MaxHidden at most: with a pattern
// matching more, it refuses to run the command (ErrTooManyHidden), and
// a sandbox prepared before the matches were made refuses too
// (ErrPreparedStale), rather than run with some of them visible.
func TestTooManyPathsToHide(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "*.pem"))
	makeMatches(t, dir, 0, MaxHidden/2)
	out, exit := runIn(t, cfg, dir, "cat f0.pem; echo ran")
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Fatalf("with %d matches: %q %+v", MaxHidden/2, out, exit)
	}
	root, null := openRootAndNull(t, dir)
	p, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	makeMatches(t, dir, MaxHidden/2, MaxHidden/2+1)
	if err := p.Run("/bin/sh", "true", nil); !errors.Is(err, ErrPreparedStale) {
		t.Errorf("a sandbox prepared before the matches were made: Run: %v, want ErrPreparedStale", err)
	}
	_, err = Start(cfg, root, "/bin/sh", "true", nil, null, null)
	if !errors.Is(err, ErrTooManyHidden) {
		t.Errorf("with more than %d matches: Start: %v, want ErrTooManyHidden", MaxHidden, err)
	}
}
