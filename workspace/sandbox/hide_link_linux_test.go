//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A symbolic link a command planted at a path to hide (or on the way
// to one, or matching a pattern) before the path existed hides what it
// leads to in the workspace: a secret the host then wrote at the path,
// following the link, is not shown to the next command under the
// link's target's name. A link that leads outside the workspace, or to
// the workspace itself, hides nothing, and commands still run.
func TestLinkPlantedAtHiddenPathHidesItsTarget(t *testing.T) {
	dir := t.TempDir()
	cfg := resolvedConfig(t, dir, filepath.Join(dir, ".env"), filepath.Join(dir, "sec", "key.txt"),
		filepath.Join(dir, "*.pem"), filepath.Join(dir, "out.txt"), filepath.Join(dir, "self.txt"))
	out, _ := runIn(t, cfg, dir, "touch notes.txt notes2.txt; ln -s notes.txt .env; mkdir real; ln -s real sec; "+
		"ln -s notes2.txt x.pem; ln -s /etc/hostname out.txt; ln -s . self.txt; echo planted")
	if !strings.Contains(out, "planted") {
		t.Fatalf("the links: %q", out)
	}
	// As os.WriteFile does: following the links.
	for _, p := range []string{".env", "sec/key.txt", "x.pem"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("SECRET-"+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, exit := runIn(t, cfg, dir, "cat notes.txt notes2.txt real/key.txt .env sec/key.txt x.pem; "+
		"test -s out.txt && ls self.txt/ >/dev/null && echo ran")
	if strings.Contains(out, "SECRET") {
		t.Errorf("a command read what the host wrote through a command's links: %q", out)
	}
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a link leading outside the workspace, or to it, hid something: %q %+v", out, exit)
	}
}
