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

// TestRemovedLinkAtHiddenPathKeepsItsTargetHidden: the next set-up
// follows a command's link at a path to hide to where it leads in the
// workspace and hides that real place (a25a79c). The link itself is no
// mount point: a command removes it, and the set-up after finds the path
// to hide missing; the place the host wrote through the link stays
// hidden all the same (LinkTargets).
func TestRemovedLinkAtHiddenPathKeepsItsTargetHidden(t *testing.T) {
	secretThroughLinkStaysHidden(t, ".env", "touch notes.txt; ln -s notes.txt .env", ".env", "rm -f .env", "notes.txt")
}

// The same for a pattern's directory (3df6375): sec -> real, for
// sec/*.key; the host writes sec/a.key (at real/a.key); a command
// retargets sec; the next one reads real/a.key.
func TestRetargetedPatternDirectoryLinkKeepsMatchesHidden(t *testing.T) {
	secretThroughLinkStaysHidden(t, "sec/*.key", "mkdir real other; ln -s real sec", "sec/a.key", "rm sec && ln -s other sec", "real/a.key")
}

// secretThroughLinkStaysHidden: with hide (relative to the workspace) to
// hide, a command runs plant (making a link that hide's path leads
// through); the host writes a secret at writeAt, which lands where the
// link leads, at read; the next command cannot read it and runs undo
// (removing or retargeting the link); the command after that cannot read
// it either.
func secretThroughLinkStaysHidden(t *testing.T, hide, plant, writeAt, undo, read string) {
	t.Helper()
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, hide))
	if out, _ := runIn(t, cfg, dir, plant+"; echo planted"); !strings.Contains(out, "planted") {
		t.Fatalf("the link: %q", out)
	}
	// The host writes its secret through the link, as os.WriteFile does.
	if err := os.WriteFile(filepath.Join(dir, writeAt), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runIn(t, cfg, dir, "cat "+read+"; "+undo+" && echo undone")
	if strings.Contains(out, "SECRET") {
		t.Fatalf("hidden at once: %q", out)
	}
	if !strings.Contains(out, "undone") {
		t.Fatalf("the link was not removed or retargeted (%s): %q", undo, out)
	}
	if out, _ = runIn(t, cfg, dir, "cat "+read); strings.Contains(out, "SECRET") {
		t.Errorf("the next command read what the host wrote at %s through a link, once the link was gone (%s): %q", writeAt, undo, out)
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
	p, outR := preparedFor(t, cfg, root)
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET-ENV"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg, dir, "rm -f .env; echo removed")
	if !strings.Contains(out, "removed") {
		t.Fatalf("the link was not removed: %q", out)
	}
	err := p.Run("/bin/sh", "cat notes.txt", nil)
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
