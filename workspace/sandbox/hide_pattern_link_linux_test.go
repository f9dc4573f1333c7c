//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A command's link at a pattern's directory (sec -> real, for
// sec/*.key) leading into the workspace is followed: what the host
// then wrote through it (sec/a.key, with os.WriteFile) is hidden at
// its real place (real/a.key) and through the link. A link at a
// pattern's directory leading outside the workspace hides nothing; one
// leading to the workspace itself (self -> ., for self/*.go) hides the
// workspace's matches (main.go: the host writing self/main.go writes
// there), never the workspace itself, and commands still run.
func TestPatternDirectoryLinkHidesMatchesAtItsTarget(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "sec", "*.key"), filepath.Join(dir, "out", "*"),
		filepath.Join(dir, "self", "*.go"))
	out, _ := runIn(t, cfg, dir, "mkdir real; ln -s real sec; ln -s /etc out; ln -s . self; echo code > main.go; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the links: %q", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "sec", "a.key"), []byte("SECRET-KEY"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, exit := runIn(t, cfg, dir, "cat real/a.key sec/a.key; ls real; cat main.go self/main.go; test -s /etc/hostname && ls self/ && echo ran")
	if strings.Contains(out, "SECRET") {
		t.Errorf("a command read what the host wrote at a pattern's match through a command's link: %q", out)
	}
	if strings.Contains(out, "code") {
		t.Errorf("a command read a match of self/*.go where self -> . leads: %q", out)
	}
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a link leading outside the workspace hid something, or one to it hid it: %q %+v", out, exit)
	}
}

// Links to the workspace itself (config -> ., and many more, each a
// loop) let a pattern's matching reach what the host wrote through
// them (config/a.key, at a.key), but multiply the paths, not the
// listings: each real directory is listed once per component, so a
// deep pattern over many such links ends with few matches, and a match
// that is the workspace itself (config/config, for config/*) is left
// out, not refused.
func TestPatternOverLinksToWorkspaceIsBounded(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.key"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	const links = 30
	for i := range links {
		if err := os.Symlink(".", filepath.Join(ws, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".", filepath.Join(ws, "config")); err != nil {
		t.Fatal(err)
	}
	matches, err := globHidden(lstats{}, filepath.Join(ws, "*", "*", "*", "*", "*.key"), ws)
	if err != nil {
		t.Fatal(err)
	}
	// One listing per component: the last lists the workspace once.
	if len(matches) != 1 {
		t.Fatalf("%d matches over %d links to the workspace, want 1: %.5q", len(matches), links+1, matches)
	}
	if r, err := resolveHidden(lstats{}, matches[0], ws, true); err != nil || r != filepath.Join(ws, "a.key") {
		t.Errorf("the match %s resolves to %q, %v; want %s", matches[0], r, err, filepath.Join(ws, "a.key"))
	}
	plan, err := planHiding([]string{filepath.Join(ws, "config", "*")}, nil, nil, ws, systemPlaces(ReadableDirs, nil))
	if err != nil {
		t.Fatalf("config/* with config -> .: %v", err)
	}
	for _, r := range plan.inside {
		if r == ws {
			t.Errorf("the workspace itself is to be hidden: %q", plan.inside)
		}
	}
	if !slices.Contains(plan.inside, filepath.Join(ws, "a.key")) {
		t.Errorf("config/* with config -> . does not hide a.key: %q", plan.inside)
	}
}
