package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// otherWorkspaceEnv, in a copy of this test run as another user, holds
// the workspace, the other workspace and the secret directory, a
// newline apart.
const otherWorkspaceEnv = "PW_OTHER_WORKSPACE_ETC"

// A directory of EtcLinkDirs in another workspace of the host's user
// is refused, as one in the workspace is: commands of that workspace
// (another program's, or this one's at another time) write there as
// that user, and a link one of them plants makes where it leads
// readable to every other workspace's commands. The host's user owns
// its workspaces, so only root's directories are trusted, on the way
// and as the directory itself. Run as root, the sandboxes run in a
// copy of this test as nobody, the owner of both workspaces; run as
// another user, in this test, as that user.
func TestCheckEtcLinkDirs_OtherWorkspaceOfTheUserRefused(t *testing.T) {
	if v := os.Getenv(otherWorkspaceEnv); v != "" {
		_, _ = io.WriteString(os.Stdout, "\n"+otherWorkspaceChild(strings.Split(v, "\n"))+"\n")
		return
	}
	user := os.Geteuid()
	if user != 0 {
		// The test's own user owns both workspaces.
		shm, secret := otherWorkspaceSecret(t)
		ws, other := filepath.Join(shm, "ws"), filepath.Join(dirOutsideTmp(t), "other")
		for _, d := range []string{ws, filepath.Join(other, "etc")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		checkOtherWorkspaceRefused(t, otherWorkspaceChild([]string{ws, other, secret}), other, user)
		return
	}
	shm, secret := otherWorkspaceSecret(t)
	// The other workspace is where the helper sees it, outside /tmp and
	// /dev, which a sandbox has of its own.
	otherBase := dirOutsideTmp(t)
	ws, other := filepath.Join(shm, "ws"), filepath.Join(otherBase, "other")
	for _, d := range []string{ws, filepath.Join(other, "etc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(otherBase, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{shm, ws, other, filepath.Join(other, "etc")} {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	got := rerunAsNobody(t, shm, ws, otherWorkspaceEnv+"="+ws+"\n"+other+"\n"+secret)
	checkOtherWorkspaceRefused(t, string(got), other, 65534)
}

// otherWorkspaceSecret makes a directory beneath /dev/shm for the
// workspace and, where Landlock keeps commands out (outside
// ReadableDirs) and nothing hides it, a secret that only a link of
// EtcLinkDirs opens, readable by anyone.
func otherWorkspaceSecret(t *testing.T) (shm, secret string) {
	t.Helper()
	shm = shmDir(t)
	secret = filepath.Join(dirOutsideTmp(t), "secret")
	writeSaying(t, secret, "db.key", "OTHER-WORKSPACE-SECRET")
	for d := secret; d != "/var/tmp" && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return shm, secret
}

// checkOtherWorkspaceRefused checks what otherWorkspaceChild said (got):
// the other workspace's etc refused, by name, as owned by user and not
// root.
func checkOtherWorkspaceRefused(t *testing.T, got, other string, user int) {
	t.Helper()
	_, after, ok := strings.Cut(got, "REFUSED: ")
	if !ok {
		t.Fatalf("a directory of EtcLinkDirs in another workspace of the user was taken:\n%s", got)
	}
	refusal, _, _ := strings.Cut(after, "\n")
	for _, want := range []string{filepath.Join(other, "etc"), "EtcLinkDirs", "uid " + strconv.Itoa(user), "root"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("refusal %q does not say %q", refusal, want)
		}
	}
}

// otherWorkspaceChild is the test as the workspaces' owner: a command
// of the other workspace plants a link in its etc, and a sandbox of the
// workspace that lists that etc in EtcLinkDirs reads where the link
// leads, or is refused. It says which.
func otherWorkspaceChild(args []string) string {
	ws, other, secret := args[0], args[1], args[2]
	run := func(dir, command string) (string, error) {
		cfg, err := Config{}.WithDefaults()
		if err != nil {
			return "", err
		}
		return runShell(cfg, dir, "/bin/sh", command)
	}
	// The other workspace's command, whose sandbox does not list its etc.
	if out, err := run(other, "ln -s "+secret+" etc/s && echo planted"); err != nil || !strings.Contains(out, "planted") {
		return "FAILED: plant the link: " + out + fmtErr(err)
	}
	saved := EtcLinkDirs
	defer func() { EtcLinkDirs = saved }()
	EtcLinkDirs = append(append([]string(nil), saved...), filepath.Join(other, "etc"))
	out, err := run(ws, "cat "+filepath.Join(secret, "db.key"))
	switch {
	case err != nil && errors.Is(err, ErrConfig):
		return "REFUSED: " + err.Error()
	case err != nil:
		return "FAILED: " + err.Error()
	case strings.Contains(out, "OTHER-WORKSPACE-SECRET"):
		return "LEAKED: " + out
	}
	return "TAKEN: " + out
}

// requireRootForOwnEtcLinkDir skips t unless the test runs as root: an
// EtcLinkDirs entry the test makes is its user's, which the check
// trusts only when that user is root (see trustedOwner), and the
// directories on the way to it (/var/tmp's pw-test-*) too.
func requireRootForOwnEtcLinkDir(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("an EtcLinkDirs entry of the test's own is trusted only when root owns it: run as root")
	}
}

// runShell runs command with shell in a new sandbox of cfg (its
// defaults filled in) around dir, and returns what it wrote, with the
// error of its start or of Finish.
func runShell(cfg Config, dir, shell, command string) (string, error) {
	root, err := os.Open(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer outR.Close()
	p, err := Start(cfg, root, shell, command, []string{"PATH=/usr/bin:/bin"}, outW, outW)
	outW.Close()
	if err != nil {
		return "", err
	}
	out, _ := io.ReadAll(outR)
	_, err = p.Finish()
	_ = p.Cmd.Wait()
	return string(out), err
}
