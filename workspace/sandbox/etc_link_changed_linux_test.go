package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A link of EtcLinkDirs that the host's administrator points elsewhere
// after a sandbox was prepared makes the prepared sandbox stale: its
// Landlock domain lets commands read where the link led then, and not
// where it leads now. Run refuses the command ([ErrPreparedStale]); a
// sandbox prepared afterwards reads the new place, not the old.
func TestPreparedSandboxStaleOnceEtcLinkRetargeted(t *testing.T) {
	requireRootForOwnEtcLinkDir(t)
	shm := shmDir(t)
	// The places are outside ReadableDirs and not hidden around a
	// workspace beneath /dev/shm: only a link of EtcLinkDirs opens them.
	base := dirOutsideTmp(t)
	etc, old, moved := filepath.Join(base, "etc"), filepath.Join(base, "old"), filepath.Join(base, "new")
	writeSaying(t, old, "f", "OLD-PLACE")
	writeSaying(t, moved, "f", "NEW-PLACE")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(etc, "certs")
	if err := os.Symlink(old, link); err != nil {
		t.Fatal(err)
	}
	saved := EtcLinkDirs
	t.Cleanup(func() { EtcLinkDirs = saved })
	EtcLinkDirs = []string{"/etc", etc}
	cfg := defaults(t, Config{})
	root, null := openRootAndNull(t, shm)
	p, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Protections().AlsoReadable, old) {
		p.Release()
		t.Fatalf("the prepared sandbox does not read where the link led: %v", p.Protections().AlsoReadable)
	}
	// The administrator moves the store: a new link renamed over the old.
	tmp := filepath.Join(etc, ".certs.new")
	if err := os.Symlink(moved, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	command := "cat " + filepath.Join(old, "f") + " " + filepath.Join(moved, "f")
	err = p.Run("/bin/sh", command, []string{"PATH=/usr/bin:/bin"})
	if err == nil {
		_, _ = p.Finish()
		_ = p.Cmd.Wait()
		t.Fatal("a prepared sandbox ran its command after a link of EtcLinkDirs was pointed elsewhere")
	}
	p.Release()
	if !errors.Is(err, ErrPreparedStale) || !strings.Contains(err.Error(), "EtcLinkDirs") {
		t.Fatalf("Run: %v; want ErrPreparedStale saying a link of EtcLinkDirs changed", err)
	}
	out, exit := runIn(t, cfg, shm, command)
	if !strings.Contains(out, "NEW-PLACE") || strings.Contains(out, "OLD-PLACE") || exit.Code == 0 {
		t.Errorf("a sandbox set up after the change: %q %+v; want the new place read and the old refused", out, exit)
	}
}
