//go:build unix

package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tmpdir700 sets TMPDIR to a fresh folder of mode 0700 owned by this
// process's user (root, when the tests run as root) for the test.
func tmpdir700(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	t.Setenv(EnvDSN, "")
	return dir
}

// TestStart_TMPDIROutOfReach: the server starts though TMPDIR is of mode
// 0700 (run as root, the server's user cannot enter it: its folder is
// made under /tmp instead), and Stop removes its folder.
func TestStart_TMPDIROutOfReach(t *testing.T) {
	tmp := tmpdir700(t)
	srv, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.Dir
	underTMPDIR := strings.HasPrefix(dir, tmp+string(filepath.Separator))
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if root := os.Geteuid() == 0; root == underTMPDIR {
		t.Errorf("running as root: %v; the server's folder %s is under TMPDIR %s: %v", root, dir, tmp, underTMPDIR)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s: %v", dir, err)
	}
}

// TestStart_NoFolderInReach: when the server's user can reach neither
// TMPDIR nor the fallback, Start fails naming the folder in its way and
// what to do (run as root; otherwise the server runs as this process's
// user, who can reach its own TMPDIR, and starts).
func TestStart_NoFolderInReach(t *testing.T) {
	tmp := tmpdir700(t)
	was := fallbackParent
	fallbackParent = tmp
	t.Cleanup(func() { fallbackParent = was })
	srv, err := Start(nil)
	if os.Geteuid() != 0 {
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err == nil {
		srv.Stop()
		t.Fatalf("Start made the server's folder in %s, which its user cannot enter", srv.Dir)
	}
	// The folder named is the outermost one in the way: TMPDIR or one
	// of its parents (t.TempDir's are of mode 0700 too).
	m := regexp.MustCompile(`cannot enter (\S+) \(mode 0700, owner root\)`).FindStringSubmatch(err.Error())
	if m == nil || !strings.HasPrefix(tmp, m[1]) {
		t.Errorf("error %q does not name TMPDIR %s or a parent of it, of mode 0700", err, tmp)
	}
	for _, want := range []string{"runs as user ", "set TMPDIR", "chmod o+x", EnvDSN} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "polyweave-pg-*")); len(left) > 0 {
		t.Errorf("Start left %v", left)
	}
}

// TestStart_SweepsFoldersOfExitedOwners: Start removes the server folders
// left by a process that exited without Stop (a test binary that
// panicked), and only those: not one whose owner runs, nor one being
// made (its owner not written yet).
func TestStart_SweepsFoldersOfExitedOwners(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv(EnvDSN, "")
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	folder := func(name, owner string) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	stale := folder("polyweave-pg-stale", strconv.Itoa(exited.Process.Pid))
	live := folder("polyweave-pg-live", strconv.Itoa(os.Getpid()))
	making := folder("polyweave-pg-making", "")
	srv, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("Start left %s, whose owner has exited: %v", stale, err)
	}
	for _, dir := range []string{live, making} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("Start removed %s, whose owner runs or is not known yet: %v", dir, err)
		}
	}
}
