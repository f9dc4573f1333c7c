//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A command makes no namespace of its own: unshare and clone with a
// CLONE_NEW* flag are refused, and clone3, whose flags a filter cannot
// read, is reported missing so that the C library falls back to clone.
// Each user namespace would count against the host user's quota, and
// one with the network allowed would give the command CAP_NET_ADMIN
// over a network stack of its own. Forking still works.
func TestNoNewNamespaces(t *testing.T) {
	// perl prints name: and how the system call in code (which sets $r)
	// failed, or "done"; then, in the parent, the code after it runs.
	perl := func(name, code string) string {
		code, after, _ := strings.Cut(code, "; ")
		return fmt.Sprintf(`perl -e '%s; $e = "$!"; %s; print "%s: ", ($r < 0 ? $e : "done"), "\n"'; `, code, after, name)
	}
	cmd := perl("unshare-user", fmt.Sprintf("$r = syscall(%d, %d)", unix.SYS_UNSHARE, unix.CLONE_NEWUSER)) +
		perl("unshare-net", fmt.Sprintf("$r = syscall(%d, %d)", unix.SYS_UNSHARE, unix.CLONE_NEWUSER|unix.CLONE_NEWNET)) +
		perl("unshare-time", fmt.Sprintf("$r = syscall(%d, %d)", unix.SYS_UNSHARE, unix.CLONE_NEWTIME)) +
		perl("clone-user", fmt.Sprintf(`$r = syscall(%d, %d, 0, 0, 0, 0); if ($r == 0) { exec "/bin/true" } wait`, unix.SYS_CLONE, unix.CLONE_NEWUSER|int(unix.SIGCHLD))) +
		perl("clone3", fmt.Sprintf(`$r = syscall(%d, $a = pack("Q11", 0x%x, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0), 88); if ($r == 0) { exec "/bin/true" } wait`, unix.SYS_CLONE3, unix.CLONE_NEWUSER)) +
		perl("fork", "$r = fork(); if ($r == 0) { exit 0 } wait") +
		`sh -c 'echo child-shell'`
	for _, allow := range []bool{false, true} {
		out, exit := runIn(t, Config{AllowNetwork: allow}, t.TempDir(), cmd)
		for _, want := range []string{
			"unshare-user: Operation not permitted\n", "unshare-net: Operation not permitted\n",
			"unshare-time: Operation not permitted\n", "clone-user: Operation not permitted\n",
			"clone3: Function not implemented\n", "fork: done\n", "child-shell\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("network allowed %v: want %q in %q (exit %+v)", allow, want, out, exit)
			}
		}
	}
}

// A datagram socket pair reaches nothing outside either: its sockets
// could otherwise send to any named datagram socket of the host by
// path. Stream and sequenced-packet pairs still work.
func TestNoDatagramSocketPairWithoutNetwork(t *testing.T) {
	dir := t.TempDir()
	host, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "host.dgram"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	cmd := `perl -MSocket -e 'for $t ([SOCK_DGRAM, "dgram"], [SOCK_DGRAM|SOCK_CLOEXEC, "dgram-cloexec"], [SOCK_STREAM|SOCK_NONBLOCK, "stream"], [SOCK_SEQPACKET, "seqpacket"]) {` +
		` if (!socketpair(A, B, AF_UNIX, $t->[0], 0)) { print "$t->[1]: $!\n"; next } print "$t->[1]: pair\n";` +
		` send(A, "HELLO-HOST", 0, pack_sockaddr_un("host.dgram")) and print "$t->[1]: sent\n" }'`
	out, _ := runIn(t, Config{}, dir, cmd)
	for _, want := range []string{"dgram: Operation not permitted\n", "dgram-cloexec: Operation not permitted\n", "stream: pair\n", "seqpacket: pair\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in %q", want, out)
		}
	}
	if strings.Contains(out, "dgram: sent") || strings.Contains(out, "dgram-cloexec: sent") {
		t.Errorf("a socket pair sent to a path: %q", out)
	}
	if err := host.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := host.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("the host's datagram socket received %d bytes from the sandbox", n)
	}
}

// Running out of user namespaces (the host user's quota) is a resource
// error, never ErrUnsupported, so it cannot turn into commands run
// without a sandbox; a quota of zero, which the administrator sets to
// turn user namespaces off, is ErrUnsupported. The test runs itself in
// a user namespace of its own, where it may lower the quota.
func TestNamespaceQuotaIsNotUnsupported(t *testing.T) {
	if os.Getenv("PW_SANDBOX_QUOTA_CHILD") == "1" {
		quotaChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNamespaceQuotaIsNotUnsupported$", "-test.v")
	cmd.Env = append(os.Environ(), "PW_SANDBOX_QUOTA_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test in a user namespace failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "quota child done") {
		t.Fatalf("the test in a user namespace did not run: %s", out)
	}
}

func quotaChild(t *testing.T) {
	const quota = "/proc/sys/user/max_user_namespaces"
	setQuota := func(n int) {
		if err := os.WriteFile(quota, []byte(fmt.Sprint(n)), 0); err != nil {
			t.Fatalf("lower the user namespace quota: %v", err)
		}
	}
	root, null := openRootAndNull(t, t.TempDir())
	cfg := defaults(t, Config{})
	setQuota(1)
	held, err := Prepare(cfg, root, null, null)
	if err != nil {
		t.Fatalf("the one sandbox the quota allows: %v", err)
	}
	defer held.Release()
	_, err = Prepare(cfg, root, null, null)
	if err == nil || errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrResources) {
		t.Errorf("a sandbox past the quota: %v; want ErrResources, not ErrUnsupported", err)
	}
	setQuota(0)
	_, err = Prepare(cfg, root, null, null)
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("a sandbox with user namespaces turned off: %v; want ErrUnsupported", err)
	}
	t.Log("quota child done")
}

// A set-up step that fails once the namespaces work is never taken for
// a system that cannot sandbox (which would run commands unsandboxed):
// it is a plain failure, or [ErrResources] when a resource ran out. Only
// the first mount, which says whether the namespaces' root may mount at
// all, is [ErrUnsupported].
func TestStepFailedIsNotUnsupported(t *testing.T) {
	for _, errno := range []syscall.Errno{unix.EPERM, unix.EACCES, unix.EINVAL, unix.ENOSYS} {
		err := stepFailed("drop capabilities", errno)
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrResources) {
			t.Errorf("%v: %v is marked unsupported or out of resources", errno, err)
		}
		if !errors.Is(err, errno) || !strings.Contains(err.Error(), "drop capabilities") {
			t.Errorf("%v: %q does not name the step and its cause", errno, err)
		}
	}
	if err := stepFailed("mount a private /tmp", unix.ENOMEM); !errors.Is(err, ErrResources) || errors.Is(err, ErrUnsupported) {
		t.Errorf("ENOMEM: %v, want ErrResources only", err)
	}
	if err := unsupported("make mounts private", unix.EPERM); !errors.Is(err, ErrUnsupported) {
		t.Errorf("the first mount refused: %v, want ErrUnsupported", err)
	}
}
