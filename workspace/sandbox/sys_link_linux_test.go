//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A link a command of an earlier opening left at a path to hide, or at
// a pattern's directory (.env -> /usr, sec -> /usr/bin for sec/*),
// leads nowhere as the workspace is opened again when it leads into a
// system directory commands read (see systemPlace): the next sandboxes
// still run programs. A link to a secret kept elsewhere still hides it.
func TestHideResolvedLinksToSystemDirs(t *testing.T) {
	base := dirOutsideTmp(t)
	ws, elsewhere := filepath.Join(base, "ws"), filepath.Join(base, "elsewhere")
	writeFiles(t, elsewhere, "x.key")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{".env": "/usr", "sec": "/usr/bin", "lib": "/lib", "etc": "/etc", "sh": "/bin/sh",
		"owner": "../elsewhere"}
	for link, to := range links {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := resolvedConfig(t, ws, filepath.Join(ws, ".env"), filepath.Join(ws, "sec", "*"), filepath.Join(ws, "lib"),
		filepath.Join(ws, "etc", "*"), filepath.Join(ws, "sh"), filepath.Join(ws, "owner", "*.key"))
	owned := false
	for _, hp := range cfg.Resolved {
		if hp.Ino != 0 && !within(hp.Path, base) {
			t.Errorf("a link in the workspace makes %s hidden", hp.Path)
		}
		owned = owned || hp.Path == filepath.Join(elsewhere, "x.key") && hp.Ino != 0
	}
	if !owned {
		t.Errorf("where the link owner led as the workspace was opened is not hidden: %+v", cfg.Resolved)
	}
	// Named as such, a system path is hidden: the configuration says so.
	if r, err := ResolveHide([]string{"/etc/passwd"}, ws); err != nil || len(r) != 1 || r[0].Ino == 0 {
		t.Errorf("ResolveHide(/etc/passwd) = %+v, %v; want it hidden", r, err)
	}
	out, exit := runIn(t, cfg, ws, "ls /usr/bin/ls /etc/passwd && echo ran")
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a system directory is hidden: %q %+v", out, exit)
	}
}

// A pattern whose directory a link in the workspace leads out of it
// as the workspace is opened (sec -> /elsewhere/sec, for sec/*.key: a
// secret kept elsewhere) hides what matches it there at each set-up,
// what the host put there since included, whatever became of the link;
// not only what matched when the workspace was opened. The workspace
// is beneath /dev/shm, whose surroundings hide nothing of the host's,
// and Landlock is off, as on a kernel without it: only the hiding
// keeps the secret from commands.
func TestHideResolvedPatternThroughLinkOutside(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "pw-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	ws, keys := filepath.Join(shm, "ws"), filepath.Join(dirOutsideTmp(t), "sec")
	writeFiles(t, keys, "a.key")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(keys, filepath.Join(ws, "sec")); err != nil {
		t.Fatal(err)
	}
	cfg := resolvedConfig(t, ws, filepath.Join(ws, "sec", "*.key"))
	cfg.WithoutLandlock = true
	writeFiles(t, keys, "b.key", "plain.txt")
	out, _ := runIn(t, cfg, ws, "cat sec/a.key sec/b.key sec/plain.txt "+filepath.Join(keys, "b.key"))
	if !strings.Contains(out, "SECRET-plain.txt") {
		t.Fatalf("what the link leads to is not visible beside the keys: %q", out)
	}
	if strings.Contains(out, "SECRET-a.key") || strings.Contains(out, "SECRET-b.key") {
		t.Errorf("a key the host keeps where the link led is visible: %q", out)
	}
	// The link retargeted (by a command, say), the keys stay hidden.
	if err := os.Remove(filepath.Join(ws, "sec")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, keys, "c.key")
	out, _ = runIn(t, cfg, ws, "cat "+filepath.Join(keys, "a.key")+" "+filepath.Join(keys, "c.key"))
	if strings.Contains(out, "SECRET-a.key") || strings.Contains(out, "SECRET-c.key") {
		t.Errorf("a key the host keeps where the link led is visible once the link is gone: %q", out)
	}
	// A match there that leads to "/" or the workspace (made since,
	// by whoever may write there) leads nowhere: set-ups still run.
	for link, to := range map[string]string{"d.key": "/", "e.key": ws} {
		if err := os.Symlink(to, filepath.Join(keys, link)); err != nil {
			t.Fatal(err)
		}
	}
	out, exit := runIn(t, cfg, ws, "cat "+filepath.Join(keys, "c.key")+"; echo ran")
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a match leading to / or the workspace made the key visible or the command fail: %q %+v", out, exit)
	}
}
