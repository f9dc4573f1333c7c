//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A link a command of an earlier opening left at a path to hide, or at
// a pattern's directory (.env -> /usr, sec -> /usr/bin for sec/*),
// leads nowhere as the workspace is opened again when it leads into a
// system directory commands read (see systemPlace): the next sandboxes
// still run programs. A link to a secret kept elsewhere still hides it.
func TestHideResolvedLinksToSystemDirs(t *testing.T) {
	base, ws, elsewhere := besideElsewhere(t)
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
	ws, keys, cfg := keptWhereLinkLed(t, "*.key", "a.key")
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

// Where a pattern's directory leads as the workspace is opened may be
// a command's choice (an earlier opening's sec -> a directory outside
// the workspace that another workspace's commands fill): a match made
// there since, which leads into a system directory commands read
// (bin.key -> /usr/bin, sh.key -> /bin/sh), leads nowhere at a set-up,
// as it would through the link as the workspace is opened; the rest of
// what the pattern matches there stays hidden.
func TestHidePatternLedOutToSystemDirs(t *testing.T) {
	ws, other := linkedOutOfShm(t, "a.key")
	cfg := resolvedConfig(t, ws, filepath.Join(ws, "sec", "*.key"))
	cfg.WithoutLandlock = true
	named := resolvedConfig(t, ws, filepath.Join(ws, "sec", "*.key"), filepath.Join(other, "*.key"))
	for link, to := range map[string]string{"bin.key": "/usr/bin", "sh.key": "/bin/sh", "etc.key": "/etc"} {
		if err := os.Symlink(to, filepath.Join(other, link)); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, other, "b.key")
	out, exit := runIn(t, cfg, ws, "cat "+filepath.Join(other, "a.key")+" "+filepath.Join(other, "b.key")+
		"; ls /usr/bin/ls /etc/passwd && echo ran")
	if strings.Contains(out, "SECRET") {
		t.Errorf("a key where the link led is visible: %q", out)
	}
	if !strings.Contains(out, "ran") || exit.Code != 0 {
		t.Errorf("a match where a link in the workspace led hid a system directory: %q %+v", out, exit)
	}
	// Named as such in Hide too, the pattern there hides what its
	// matches made since lead to, as the configuration says.
	plan, err := planHiding(nil, named.Resolved, nil, ws, systemPlaces(ReadableDirs, nil))
	if err != nil {
		t.Fatal(err)
	}
	etc, err := filepath.EvalSymlinks("/etc")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.outside, etc) {
		t.Errorf("%s/etc.key -> /etc, named in Hide, leads nowhere: %q", other, plan.outside)
	}
}

// ResolveHideNoting names, once each, the entries it left out in part
// or whole because a link in the workspace led them into a system
// directory, with where, and how many of their paths: an exact path,
// the matches of a pattern, a pattern whose directory leads there
// though nothing matches it yet. Entries hidden as configured, a
// system path named itself among them, are not named.
func TestResolveHideNotesLinksToSystemDirs(t *testing.T) {
	_, ws, _ := besideElsewhere(t)
	for link, to := range map[string]string{".env": "/usr", "sec": "/usr/bin", "conf": "/etc", "owner": "../elsewhere"} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := filepath.EvalSymlinks("/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	inBin, err := os.ReadDir(bin)
	if err != nil {
		t.Fatal(err)
	}
	env, sec, conf := filepath.Join(ws, ".env"), filepath.Join(ws, "sec", "*"), filepath.Join(ws, "conf", "*.no-such-key")
	resolved, notes, err := ResolveHideNoting([]string{env, filepath.Join(ws, "owner", "*.key"), sec, conf, "/etc/passwd"}, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(resolved) == 0 {
		t.Fatal("nothing resolved")
	}
	usr, err := filepath.EvalSymlinks("/usr")
	if err != nil {
		t.Fatal(err)
	}
	etc, err := filepath.EvalSymlinks("/etc")
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 3 {
		t.Fatalf("notes = %+v; want .env, sec/* and conf/*.no-such-key", notes)
	}
	if n := notes[0]; n != (LinkToSystem{Entry: env, Path: env, To: usr, Count: 1}) {
		t.Errorf("the note of .env = %+v", n)
	}
	if n := notes[1]; n.Entry != sec || !within(n.Path, filepath.Join(ws, "sec")) || !within(n.To, bin) || n.Count < 2 || n.Count > len(inBin) {
		t.Errorf("the note of sec/* = %+v; want one of its matches in %s, and how many (of %d names there)", n, bin, len(inBin))
	}
	if n := notes[2]; n != (LinkToSystem{Entry: conf, Path: filepath.Join(ws, "conf"), To: etc, Count: 0}) {
		t.Errorf("the note of conf/*.no-such-key = %+v", n)
	}
}

// linkedOutOfShm makes a workspace beneath /dev/shm, whose surroundings
// hide nothing of the host's, with a link sec in it to a directory
// outside it and outside /tmp that holds the files names (see
// writeFiles), and returns both; they are removed after the test.
func linkedOutOfShm(t *testing.T, names ...string) (ws, sec string) {
	t.Helper()
	shm, err := os.MkdirTemp("/dev/shm", "pw-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	ws, sec = filepath.Join(shm, "ws"), filepath.Join(dirOutsideTmp(t), "sec")
	if err := os.MkdirAll(sec, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, sec, names...)
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sec, filepath.Join(ws, "sec")); err != nil {
		t.Fatal(err)
	}
	return ws, sec
}

// keptWhereLinkLed is linkedOutOfShm with the files names in sec, and
// a Config, Landlock off, that hides entry in the workspace's sec
// (sec/entry), resolved.
func keptWhereLinkLed(t *testing.T, entry string, names ...string) (ws, sec string, cfg Config) {
	t.Helper()
	ws, sec = linkedOutOfShm(t, names...)
	cfg = resolvedConfig(t, ws, filepath.Join(ws, "sec", entry))
	cfg.WithoutLandlock = true
	return ws, sec, cfg
}

// besideElsewhere makes a directory base outside /tmp, removed after
// the test, holding the workspace ws and the directory elsewhere with
// x.key in it (see writeFiles).
func besideElsewhere(t *testing.T) (base, ws, elsewhere string) {
	t.Helper()
	base = dirOutsideTmp(t)
	ws, elsewhere = filepath.Join(base, "ws"), filepath.Join(base, "elsewhere")
	writeFiles(t, elsewhere, "x.key")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return base, ws, elsewhere
}
