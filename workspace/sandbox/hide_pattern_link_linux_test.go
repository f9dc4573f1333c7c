//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command's link at a pattern's directory (sec -> real, for
// sec/*.key) leading into the workspace is followed: what the host
// then wrote through it (sec/a.key, with os.WriteFile) is hidden at
// its real place (real/a.key) and through the link. A link at a
// pattern's directory leading outside the workspace, or to the
// workspace itself, hides nothing, and commands still run.
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
	out, exit := runIn(t, cfg, dir, "cat real/a.key sec/a.key; ls real; test -s /etc/hostname && cat main.go && echo ran")
	if strings.Contains(out, "SECRET") {
		t.Errorf("a command read what the host wrote at a pattern's match through a command's link: %q", out)
	}
	if !strings.Contains(out, "code") || !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a link leading outside the workspace, or to it, hid something: %q %+v", out, exit)
	}
}
