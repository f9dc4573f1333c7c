//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A one-shot link at a path to hide (.env -> src) makes the next
// set-up hide src, for good as far as commands go: src is a mount point
// in each sandbox (rm fails with EBUSY) and the link is gone. The place
// is reported with the protections of each later sandbox, so the host
// (and the model) see why src looks empty; once the host forgets it
// (it knows no secret was written through the link), a command reads
// src again.
func TestOneShotLinkTargetReportedAndForgotten(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main // CODE"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	out, _ := runIn(t, cfg, dir, "ln -s src .env && echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "rm .env && echo removed")
	if !strings.Contains(out, "removed") {
		t.Fatalf("the link was not removed: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "cat src/main.go 2>&1; echo ran")
	if strings.Contains(out, "CODE") || !strings.Contains(out, "ran") {
		t.Fatalf("src, where the link led, was shown once the link was gone: %q", out)
	}
	root, null := openRootAndNull(t, dir)
	p, err := Start(cfg, root, "/bin/sh", "true", nil, null, null)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if got := p.Protections().LinkTargets; !slices.Equal(got, []string{src}) {
		t.Errorf("the sandbox's protections name %q as places links led to, want %q", got, src)
	}
	if s := p.Protections().String(); !strings.Contains(s, src) || !strings.Contains(s, "link") {
		t.Errorf("the protections' line does not say %s is hidden because a link led there: %s", src, s)
	}

	cfg.LinkTargets.Forget(src)
	if got := cfg.LinkTargets.Paths(); len(got) != 0 {
		t.Fatalf("after Forget: %q", got)
	}
	out, _ = runIn(t, cfg, dir, "cat src/main.go 2>&1; echo ran")
	if !strings.Contains(out, "CODE") {
		t.Errorf("src is still hidden after the host forgot it: %q", out)
	}
}

// A sandbox prepared while a place was in the set hides it: once the
// host forgot the place, Run refuses it as stale, so that the command
// runs in a sandbox set up anew, which shows the place.
func TestPreparedSandboxStaleOnceLinkTargetForgotten(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("NOTES"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	out, _ := runIn(t, cfg, dir, "ln -s notes.txt .env && echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "rm .env && echo removed")
	if !strings.Contains(out, "removed") {
		t.Fatalf("the link was not removed: %q", out)
	}
	root, null := openRootAndNull(t, dir)
	p, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	cfg.LinkTargets.Forget(filepath.Join(dir, "notes.txt"))
	err = p.Run("/bin/sh", "true", nil)
	if !errors.Is(err, ErrPreparedStale) {
		if err == nil {
			_, _ = p.Finish()
		}
		t.Errorf("Run of a sandbox that hides a place forgotten since: %v, want ErrPreparedStale", err)
	}
}

// Two Configs of one workspace directory (two Workspaces on it) share
// the places links led to, through LinkTargetsOf: a link followed by a
// set-up of the first and then removed is hidden from the second's
// sandboxes too.
func TestLinkTargetsSharedByDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg1 := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	cfg1.LinkTargets = LinkTargetsOf(dir)
	cfg2 := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	cfg2.LinkTargets = LinkTargetsOf(dir)
	out, _ := runIn(t, cfg1, dir, "touch notes.txt; ln -s notes.txt .env; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET-ENV"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg1, dir, "cat notes.txt 2>&1; rm -f .env; echo removed")
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "removed") {
		t.Fatalf("cfg1's second command: %q", out)
	}
	out, _ = runIn(t, cfg2, dir, "cat notes.txt 2>&1; echo ran")
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "ran") {
		t.Errorf("a sandbox of a second Config on the same directory read what the host wrote through a link "+
			"(cfg1 knows %v, cfg2 %v): %q", cfg1.LinkTargets.Paths(), cfg2.LinkTargets.Paths(), out)
	}
	if LinkTargetsOf(dir) != LinkTargetsOf(dir+"/") {
		t.Error("LinkTargetsOf gives two sets for one directory")
	}
}
