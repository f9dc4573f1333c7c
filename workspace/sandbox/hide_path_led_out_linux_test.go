//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A path to hide that does not exist yet as the workspace is opened,
// whose directory a link in the workspace leads out of it (sec ->
// /elsewhere/sec, for sec/a.key: a secret kept elsewhere, written
// later), is hidden where the link led, at each set-up, whatever
// became of the link, as a pattern is (TestHideResolvedPatternThroughLinkOutside).
// The workspace is beneath /dev/shm, whose surroundings hide nothing
// of the host's, and Landlock is off: only the hiding keeps the secret
// from commands.
func TestHideResolvedPathThroughLinkOutside(t *testing.T) {
	ws, keys, cfg := keptWhereLinkLed(t, "a.key")
	writeFiles(t, keys, "a.key", "plain.txt")
	out, _ := runIn(t, cfg, ws, "cat sec/plain.txt sec/a.key "+filepath.Join(keys, "a.key"))
	if !strings.Contains(out, "SECRET-plain.txt") {
		t.Fatalf("what the link leads to is not visible beside the key: %q", out)
	}
	if strings.Contains(out, "SECRET-a.key") {
		t.Errorf("a key the host wrote where the link led is visible: %q", out)
	}
	if err := os.Remove(filepath.Join(ws, "sec")); err != nil {
		t.Fatal(err)
	}
	out, _ = runIn(t, cfg, ws, "cat "+filepath.Join(keys, "a.key"))
	if strings.Contains(out, "SECRET-a.key") {
		t.Errorf("a key the host wrote where the link led is visible once the link is gone: %q", out)
	}
	// Where the link led may have been a command's choice: a link
	// made there since into a system directory leads nowhere.
	if err := os.Remove(filepath.Join(keys, "a.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin", filepath.Join(keys, "a.key")); err != nil {
		t.Fatal(err)
	}
	out, exit := runIn(t, cfg, ws, "ls /usr/bin/ls && echo ran")
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a link where a link in the workspace led hid a system directory: %q %+v", out, exit)
	}
	// Nor does one to "/" or to the workspace fail the set-ups.
	for _, to := range []string{"/", ws} {
		if err := os.Remove(filepath.Join(keys, "a.key")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, filepath.Join(keys, "a.key")); err != nil {
			t.Fatal(err)
		}
		out, exit := runIn(t, cfg, ws, "echo ran")
		if !strings.Contains(out, "ran") || exit.Code != 0 {
			t.Errorf("a link to %s where a link in the workspace led failed the set-up: %q %+v", to, out, exit)
		}
	}
}
