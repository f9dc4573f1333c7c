//go:build linux

package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// runSandboxed runs command in ws's sandbox and fails the test when it
// could not, or ran unsandboxed.
func runSandboxed(t *testing.T, ws *Workspace, command string) RunCommandResult {
	t.Helper()
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: command})
	mustDo(t, err)
	if !res.Sandboxed {
		t.Fatalf("not sandboxed: %+v", res)
	}
	return res
}

// A hidden file replaced while a sandbox waits, prepared, for the next
// command (write_file, or a remove and a create, which on ext4 gives
// the new file the inode number just freed: the same identity) is not
// shown to that command: the prepared sandbox's cover went with the
// old file, and Run finds it gone and prepares another.
func TestHiddenFileReplacedWhilePreparedStaysHidden(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name, hide, file string
		atOpen, tool     bool
	}{
		{"present at open, write_file twice", "key.env", "key.env", true, true},
		{"present at open, remove and create", "key.env", "key.env", true, false},
		{"made later, write_file twice", "later.env", "later.env", false, true},
		{"made later, remove and create", "later.env", "later.env", false, false},
		{"pattern, remove and create", "*.pem", "a.pem", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			key := filepath.Join(dir, c.file)
			if c.atOpen {
				mustDo(t, os.WriteFile(key, []byte("SECRET-OLD"), 0o644))
			}
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, c.hide)}})
			mustDo(t, err)
			defer ws.Close()
			ctx := context.Background()
			if !c.atOpen {
				mustDo(t, os.WriteFile(key, []byte("SECRET-OLD"), 0o600))
			}
			if res := runSandboxed(t, ws, "cat "+c.file); strings.Contains(res.Stdout, "SECRET") {
				t.Fatalf("the hidden file was read before it was replaced: %q", res.Stdout)
			}
			mustDo(t, ws.Warm(ctx)) // prepared: it covers the file as it is now
			if c.tool {
				for _, content := range []string{"SECRET-NEW1", "SECRET-NEW2"} {
					res, err := ws.WriteFile(ctx, WriteFileInput{Path: c.file, Content: content})
					mustDo(t, err)
					if !res.Success {
						t.Fatalf("write_file: %+v", res)
					}
				}
			} else {
				mustDo(t, os.Remove(key))
				mustDo(t, os.WriteFile(key, []byte("SECRET-NEW"), 0o600))
			}
			// A path present at open that holds another file now, put
			// there from outside the tools, may also be refused
			// (ErrHiddenMoved): the new file's inode decides, and
			// either answer keeps the secret. One the tools wrote is
			// what the sandboxes expect there: the command runs.
			res, err := ws.RunCommand(ctx, RunCommandInput{Command: "cat " + c.file})
			mustDo(t, err)
			switch {
			case strings.Contains(res.Stdout, "SECRET"):
				t.Errorf("the command read the replaced hidden file: %q", res.Stdout)
			case !res.Sandboxed && !(c.atOpen && !c.tool && strings.Contains(res.Error, "moved or replaced")):
				t.Errorf("the command did not run sandboxed: %+v", res)
			}
		})
	}
}

// A directory on a pattern's way that its owner cannot list (-wx,
// made by a command) does not hide from a prepared sandbox a match
// written in it meanwhile: the next command, which could make it
// listable again, does not see the match. The host that cannot list
// it is one that is not root, so as root the test runs itself as
// nobody.
func TestUnlistableDirectoryDoesNotHideNewMatch(t *testing.T) {
	requireSandbox(t)
	if os.Getenv("PW_WORKSPACE_NOBODY_CHILD") == "1" {
		unlistableDirectoryChild(t)
		return
	}
	if os.Geteuid() != 0 {
		unlistableDirectoryChild(t)
		return
	}
	tmp, err := os.MkdirTemp("", "nobody")
	mustDo(t, err)
	defer os.RemoveAll(tmp)
	mustDo(t, os.Chmod(tmp, 0o755))
	// A copy of this test binary nobody can run (the build directory
	// is root's), and a directory of nobody's for its files.
	self, err := os.ReadFile("/proc/self/exe")
	mustDo(t, err)
	bin := filepath.Join(tmp, "workspace.test")
	mustDo(t, os.WriteFile(bin, self, 0o755))
	home := filepath.Join(tmp, "home")
	mustDo(t, os.Mkdir(home, 0o755))
	mustDo(t, os.Chown(home, 65534, 65534))
	cmd := exec.Command(bin, "-test.run=^TestUnlistableDirectoryDoesNotHideNewMatch$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "PW_WORKSPACE_NOBODY_CHILD=1", "TMPDIR="+home, noRaceExitSleep)
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "nobody child done") {
		t.Fatalf("the test run as nobody failed: %v\n%s", err, out)
	}
}

func unlistableDirectoryChild(t *testing.T) {
	for _, c := range []struct{ name, pattern, unlist, secret, read string }{
		{"subdirectory", "keys/*.pem", "mkdir keys && chmod 333 keys", "keys/a.pem", "chmod 755 keys; cat keys/a.pem"},
		{"workspace", "*.pem", "chmod 333 .", "a.pem", "chmod 755 .; cat a.pem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			defer os.Chmod(dir, 0o755) // for t.TempDir's removal
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, c.pattern)}})
			mustDo(t, err)
			defer ws.Close()
			runSandboxed(t, ws, c.unlist)
			mustDo(t, ws.Warm(context.Background()))
			mustDo(t, os.WriteFile(filepath.Join(dir, c.secret), []byte("SECRET-PEM"), 0o600))
			if res := runSandboxed(t, ws, c.read); strings.Contains(res.Stdout, "SECRET") {
				t.Errorf("the command read the match written in the unlistable directory: %q", res.Stdout)
			}
		})
	}
	t.Log("nobody child done")
}

// When the paths to hide change again while a sandbox is prepared anew
// for a command (the one prepared ahead was stale), the command does
// not run, and the model is not told which hidden path changed.
func TestStaleTwiceDoesNotNameTheHiddenPath(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "*.pem")}})
	mustDo(t, err)
	defer ws.Close()
	mustDo(t, ws.Warm(context.Background()))
	mustDo(t, os.WriteFile(filepath.Join(dir, "first-secret-name.pem"), []byte("SECRET-1"), 0o600))
	ws.hookBeforeRun = func() {
		mustDo(t, os.WriteFile(filepath.Join(dir, "second-secret-name.pem"), []byte("SECRET-2"), 0o600))
	}
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "cat *.pem"})
	mustDo(t, err)
	if res.Success || res.Reason != ReasonStartFailed || strings.Contains(res.Stdout, "SECRET") {
		t.Fatalf("the command ran though the paths to hide changed twice: %+v", res)
	}
	if strings.Contains(res.Error, "secret-name") || !strings.Contains(res.Error, "try again") {
		t.Errorf("the model's error names the hidden path, or does not say what to do: %q", res.Error)
	}
}
