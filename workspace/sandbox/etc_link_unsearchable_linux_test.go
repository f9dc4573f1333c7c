package sandbox

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// unsearchableEnv, in a copy of this test run as another user, holds
// the EtcLinkDirs entry and the workspace to check, a newline apart.
const unsearchableEnv = "PW_UNSEARCHABLE_ETC"

// A directory of EtcLinkDirs that the host cannot search (EACCES on the
// way to it) is refused: whether a link there is safe to follow cannot
// be checked, and the sandbox must never let commands read more than
// was checked. The refusal names the entry, what went wrong and the
// fix. Run as root, the check runs in a copy of this test as nobody,
// whom a directory of root's with mode 0700 keeps out; run as another
// user, it checks a directory in root's home.
func TestCheckEtcLinkDirs_UnsearchableEntryNamedWithTheFix(t *testing.T) {
	if v := os.Getenv(unsearchableEnv); v != "" {
		entry, ws, _ := strings.Cut(v, "\n")
		root, err := os.Open(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		err = checkEtcLinkDirs([]string{"/etc", entry}, root)
		if err != nil && errors.Is(err, ErrConfig) {
			_, _ = io.WriteString(os.Stdout, "\nREFUSED: "+err.Error()+"\n")
		} else {
			_, _ = io.WriteString(os.Stdout, "\nTAKEN: "+fmtErr(err)+"\n")
		}
		return
	}
	base := t.TempDir()
	for d := base; d != filepath.Dir(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if d == os.TempDir() {
			break
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	locked := filepath.Join(base, "locked")
	entry := filepath.Join(locked, "etc")
	ws := filepath.Join(base, "ws")
	for _, d := range []string{entry, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out string
	if os.Geteuid() != 0 {
		// A directory of the test's own user is refused as such (see
		// trustedOwner) before it could be found unsearchable: root's
		// home is root's, and closed to others.
		entry = "/root/etc"
		if _, err := os.Lstat(entry); !errors.Is(err, fs.ErrPermission) {
			t.Skipf("no directory of root's that this user cannot search to check (%s: %v)", entry, err)
		}
		root, err := os.Open(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		err = checkEtcLinkDirs([]string{"/etc", entry}, root)
		if err == nil || !errors.Is(err, ErrConfig) {
			t.Fatalf("an EtcLinkDirs entry the host cannot search: %v; want it refused with ErrConfig", err)
		}
		out = "REFUSED: " + err.Error()
	} else {
		if err := os.Chmod(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		got := rerunAsNobody(t, base, ws, unsearchableEnv+"="+entry+"\n"+ws)
		_, after, ok := strings.Cut(string(got), "\nREFUSED: ")
		if !ok {
			t.Fatalf("an EtcLinkDirs entry the host cannot search was not refused with ErrConfig:\n%s", got)
		}
		out, _, _ = strings.Cut(after, "\n")
		out = "REFUSED: " + out
	}
	for _, want := range []string{entry, "EtcLinkDirs", "permission denied", "searchable", "leave it out"} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal %q does not say %q", out, want)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// rerunAsNobody runs this test again, alone, in a copy of the test
// binary made in dir (which nobody must be able to reach), as nobody
// (uid and gid 65534), in the directory cwd, with env added to the
// environment; and returns what it wrote, failing t when it failed.
func rerunAsNobody(t *testing.T, dir, cwd, env string) []byte {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env, "GORACE=atexit_sleep_ms=0")
	cmd.Dir = cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test as nobody: %v\n%s", err, got)
	}
	return got
}

// shmDir is a new directory beneath /dev/shm, removed after the test: a
// workspace there has no surroundings to hide (the sandbox's /dev is its
// own), so what the sandbox lets commands read outside it is what
// Landlock allows.
func shmDir(t *testing.T) string {
	t.Helper()
	shm, err := os.MkdirTemp("/dev/shm", "pw-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	return shm
}

// writeSaying makes the directory dir, and in it a file name that says
// says, readable by anyone.
func writeSaying(t *testing.T, dir, name, says string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(says), 0o644); err != nil {
		t.Fatal(err)
	}
}
