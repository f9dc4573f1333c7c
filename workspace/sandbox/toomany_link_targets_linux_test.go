//go:build linux

package sandbox

import (
	"path/filepath"
	"strings"
	"testing"
)

// Places of LinkTargets count towards MaxHidden: the ErrTooManyHidden
// message names them beside the patterns' matches, and says how the
// host clears them, for no command can, and no path to hide names them.
func TestTooManyHiddenNamesTheLinkTargets(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "sec", "*.key"))
	out, _ := runIn(t, cfg, dir, "mkdir real && i=0; while [ $i -lt 3000 ]; do : > real/f$i.key; i=$((i+1)); done; ln -s real sec && echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "rm sec && mkdir sec && i=0; while [ $i -lt 1200 ]; do : > sec/g$i.key; i=$((i+1)); done; echo made")
	if !strings.Contains(out, "made") {
		t.Fatalf("the matches: %q", out)
	}
	if n := len(cfg.LinkTargets.Paths()); n != 3000 {
		t.Fatalf("LinkTargets: %d places, want 3000", n)
	}
	root, null := openRootAndNull(t, dir)
	_, err := Start(cfg, root, "/bin/sh", "true", nil, null, null)
	if err == nil {
		t.Fatal("ran with 4200 paths to hide")
	}
	msg := err.Error()
	for _, want := range []string{"3000 places links led to", "real/f", "Forget"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
