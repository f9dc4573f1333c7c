package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A link of EtcLinkDirs that leads through /proc (to /proc/self/cwd,
// say) names no place: the kernel follows the links of /proc to what
// they stand for in the process that follows them, not to the path
// they read as. A command that follows it reaches its own working
// directory; read as text in the host, it named the host's, which the
// sandbox then let commands read. It is left out: nothing it reads as
// becomes readable.
func TestEtcLinkThroughProcLeftOut(t *testing.T) {
	requireRootForOwnEtcLinkDir(t)
	shm := shmDir(t)
	// The host's working directory, outside ReadableDirs and not hidden
	// around a workspace beneath /dev/shm.
	base := dirOutsideTmp(t)
	cwd, etc := filepath.Join(base, "host-cwd"), filepath.Join(base, "etc")
	writeSaying(t, cwd, "f", "HOST-CWD")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/cwd", filepath.Join(etc, "here")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	saved := EtcLinkDirs
	t.Cleanup(func() { EtcLinkDirs = saved })
	EtcLinkDirs = []string{"/etc", etc}
	cfg := defaults(t, Config{})
	root, _ := openRootAndNull(t, shm)
	prot, err := Probe(cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(prot.AlsoReadable, cwd) {
		t.Errorf("the host's working directory is readable through a link to /proc/self/cwd: %v", prot.AlsoReadable)
	}
	out, exit := runIn(t, cfg, shm, "cat "+filepath.Join(cwd, "f"))
	if strings.Contains(out, "HOST-CWD") || exit.Code == 0 {
		t.Errorf("a command read the host's working directory through a link of EtcLinkDirs to /proc: %q %+v", out, exit)
	}
}

// A directory of EtcLinkDirs reached through a link of /proc
// (/proc/self/root/etc, /proc/1234/root/etc) is refused: the check
// walks the path the link reads as, and the kernel opens what it
// stands for, in the process that follows it (another mount namespace's
// root, say, whose etc someone else may write).
func TestCheckEtcLinkDirs_ThroughProcRefused(t *testing.T) {
	requireRootForOwnEtcLinkDir(t)
	ws := t.TempDir()
	root, _ := openRootAndNull(t, ws)
	etc := filepath.Join(dirOutsideTmp(t), "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkEtcLinkDirs([]string{"/etc", etc}, root); err != nil {
		t.Fatalf("%s, checked by its own path: %v", etc, err)
	}
	for _, entry := range []string{"/proc/self/root" + etc, "/proc/" + strconv.Itoa(os.Getpid()) + "/root" + etc} {
		err := checkEtcLinkDirs([]string{"/etc", entry}, root)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), entry) || !strings.Contains(err.Error(), "/proc") {
			t.Errorf("checkEtcLinkDirs(%s): %v; want ErrConfig naming it and /proc", entry, err)
		}
	}
}
