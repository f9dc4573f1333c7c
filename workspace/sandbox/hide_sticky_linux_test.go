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

// the next set-up follows a command's link at a path to hide to
// where it leads in the workspace and hides that real place (a25a79c).
// But the link itself is no mount point: the command of that very
// sandbox removes it, and the set-up after finds the path to hide
// missing, so the file the host wrote through the link is shown under
// its real name.
func TestRemovedLinkAtHiddenPathKeepsItsTargetHidden(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	out, _ := runIn(t, cfg, dir, "touch notes.txt; ln -s notes.txt .env; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	// The host writes its secret at .env, as os.WriteFile does.
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET-ENV"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg, dir, "cat notes.txt; rm -f .env; echo removed")
	if strings.Contains(out, "SECRET") {
		t.Fatalf("hidden at once: %q", out)
	}
	if !strings.Contains(out, "removed") {
		t.Fatalf("the link was not removed: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "cat notes.txt")
	if strings.Contains(out, "SECRET") {
		t.Errorf("the next command read what the host wrote at .env through a link, once the link was removed: %q", out)
	}
}

// The same for a pattern's directory (3df6375): sec -> real, for
// sec/*.key; the host writes sec/a.key (at real/a.key); a command
// retargets sec; the next one reads real/a.key.
func TestRetargetedPatternDirectoryLinkKeepsMatchesHidden(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, "sec", "*.key"))
	out, _ := runIn(t, cfg, dir, "mkdir real other; ln -s real sec; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "sec", "a.key"), []byte("SECRET-KEY"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg, dir, "cat real/a.key; rm sec && ln -s other sec && echo retargeted")
	if strings.Contains(out, "SECRET") {
		t.Fatalf("hidden at once: %q", out)
	}
	if !strings.Contains(out, "retargeted") {
		t.Fatalf("the link was not retargeted: %q", out)
	}
	out, _ = runIn(t, cfg, dir, "cat real/a.key")
	if strings.Contains(out, "SECRET") {
		t.Errorf("the next command read what the host wrote at sec/a.key through a link, once the link was retargeted: %q", out)
	}
}

// A place a link led to is hidden by its name, whatever characters it
// holds: n[1].txt is not taken for a pattern (which would match n1.txt
// instead).
func TestLinkTargetWithPatternCharactersHiddenByItsName(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	out, _ := runIn(t, cfg, dir, "touch 'n[1].txt' n1.txt; ln -s 'n[1].txt' .env; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET-ENV"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg, dir, "rm -f .env; echo removed")
	if !strings.Contains(out, "removed") {
		t.Fatalf("the link was not removed: %q", out)
	}
	out, exit := runIn(t, cfg, dir, "cat 'n[1].txt'; test -f n1.txt && echo ran")
	if strings.Contains(out, "SECRET") {
		t.Errorf("the next command read what the host wrote through the link: %q", out)
	}
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("the command did not run as it should: %q %+v", out, exit)
	}
}

// A sandbox prepared before another set-up found where a link led, and
// handed its command after that link was removed, refuses it
// (ErrPreparedStale): Run's check looks for the places links led to
// as known when Run is called, not only when the sandbox was prepared.
func TestPreparedSandboxLooksForLinkTargetsFoundSince(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	out, _ := runIn(t, cfg, dir, "ln -s notes.txt .env; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	root, _ := openRootAndNull(t, dir)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Prepare(cfg, root, outW, outW)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET-ENV"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg, dir, "rm -f .env; echo removed")
	if !strings.Contains(out, "removed") {
		t.Fatalf("the link was not removed: %q", out)
	}
	err = p.Run("/bin/sh", "cat notes.txt", nil)
	if err == nil {
		_, _ = p.Finish()
		b, _ := io.ReadAll(outR)
		t.Fatalf("the prepared sandbox ran its command (%q), with notes.txt, where the link led, visible", b)
	}
	if !errors.Is(err, ErrPreparedStale) {
		t.Errorf("Run refused, but not as stale: %v", err)
	}
}

// A Config with paths to hide and no LinkTargets (one made without
// WithDefaults) is refused: its sandboxes would forget where links led.
func TestConfigWithoutLinkTargetsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"))
	cfg.LinkTargets = nil
	root, null := openRootAndNull(t, dir)
	p, err := Prepare(cfg, root, null, null)
	if err == nil {
		p.Release()
		t.Fatal("Prepare took a Config with paths to hide and no LinkTargets")
	}
	if !errors.Is(err, ErrConfig) {
		t.Errorf("refused, but not as ErrConfig: %v", err)
	}
}
