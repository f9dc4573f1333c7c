//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// runIn runs command with /bin/sh in a sandbox of cfg rooted at dir and
// returns what it printed (stdout and stderr) and how it exited.
func runIn(t *testing.T, cfg Config, dir, command string) (string, Exit) {
	t.Helper()
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p, err := Start(defaults(t, cfg), root, "/bin/sh", command, []string{"PATH=/usr/bin:/bin"}, outW, outW)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := new(strings.Builder)
	buf := make([]byte, 4096)
	for {
		n, err := outR.Read(buf)
		out.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
	}
	exit, err := p.Finish()
	_ = p.Cmd.Wait()
	if err != nil {
		t.Fatalf("sandbox: %v (output %q)", err, out)
	}
	return out.String(), exit
}

// A named Unix socket the host listens on, here one in the workspace
// itself (the path is surely visible), cannot be reached from a sandbox
// without network; a socket pair still works. With the network allowed,
// it can, unless Landlock (ABI 9 or later) refuses the Unix sockets made
// outside the sandbox.
func TestNoUnixSocketsWithoutNetwork(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	defer ln.Close()
	connect := `perl -MSocket -e 'socket(S, AF_UNIX, SOCK_STREAM, 0) or die "socket: $!\n"; connect(S, pack_sockaddr_un("host.sock")) or die "connect: $!\n"; print "connected\n"'; ` +
		`perl -MSocket -e 'socket(S, AF_NETLINK, SOCK_RAW, 0) or die "netlink: $!\n"; print "netlink\n"'; ` +
		`perl -MSocket -e 'socketpair(A, B, AF_UNIX, SOCK_STREAM, 0) or die "socketpair: $!\n"; print "pair\n"'`
	out, _ := runIn(t, Config{}, dir, connect)
	if strings.Contains(out, "connected") || strings.Contains(out, "netlink\n") || len(accepted) > 0 {
		t.Errorf("a sandbox without network reached a Unix socket or made a netlink one: %q", out)
	}
	if !strings.Contains(out, "socket: Operation not permitted") || !strings.Contains(out, "pair\n") {
		t.Errorf("want socket(AF_UNIX) refused with EPERM and socketpair working, got %q", out)
	}
	out, _ = runIn(t, Config{AllowNetwork: true}, dir, connect)
	if abi, _ := ll.LandlockGetABIVersion(); strings.Contains(out, "connected") != (abi < 9) {
		t.Errorf("with the network allowed and Landlock ABI %d, the Unix socket reached: %q", abi, out)
	}
}

// The host's session keyring is out of reach: searching it from inside
// finds nothing, and keyctl is refused.
func TestHostKeyringUnreachable(t *testing.T) {
	desc := fmt.Sprintf("pw-sandbox-test-%d", os.Getpid())
	const secret = "KEYRING-SECRET-9f2c"
	id, err := unix.AddKey("user", desc, []byte(secret), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		t.Skipf("no keyring to test with: %v", err) // kernels without CONFIG_KEYS have nothing to leak
	}
	defer unix.KeyctlInt(unix.KEYCTL_REVOKE, id, 0, 0, 0)
	cmd := fmt.Sprintf(`perl -e '$t = "user"; $d = "%s"; $id = syscall(%d, 10, -3, $t, $d, 0); if ($id < 0) { print "search: $!\n"; exit } $b = "\0" x 100; $n = syscall(%d, 11, $id, $b, 100); print "read: ", substr($b, 0, $n), "\n"'`,
		desc, unix.SYS_KEYCTL, unix.SYS_KEYCTL)
	out, _ := runIn(t, Config{}, t.TempDir(), cmd)
	if strings.Contains(out, secret) || !strings.Contains(out, "search: Operation not permitted") {
		t.Errorf("keyctl from inside: %q; want it refused with EPERM", out)
	}
}

// A command cannot leave a set-user-ID or set-group-ID file behind: not
// by chmod, not by creating one with that mode.
func TestNoSetuidFiles(t *testing.T) {
	dir := t.TempDir()
	cmd := `cp /bin/sh rootsh; chmod 4755 rootsh; chmod g+s rootsh; ` +
		`perl -e 'chmod(06755, "rootsh") or print "perl chmod: $!\n"'; ` +
		`perl -MFcntl -e 'sysopen(F, "created", O_CREAT|O_WRONLY, 04755) or print "create: $!\n"'; ` +
		`perl -MFcntl -e 'sysopen(F, "plain", O_CREAT|O_WRONLY, 0755) or print "plain: $!\n"'; ` +
		`cp /bin/sh other; chmod 755 other && echo plain-chmod-ok`
	out, _ := runIn(t, Config{}, dir, cmd)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s has mode %v after the command", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "perl chmod: Operation not permitted") || !strings.Contains(out, "create: Operation not permitted") {
		t.Errorf("want the set-ID chmod and creation refused with EPERM: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "plain")); err != nil || !strings.Contains(out, "plain-chmod-ok") {
		t.Errorf("an ordinary create or chmod failed: %v, %q", err, out)
	}
}

// dirOutsideTmp is a new directory, removed after the test, that is not
// beneath /tmp (which the sandbox replaces with a tmpfs of its own).
func dirOutsideTmp(t *testing.T) string {
	t.Helper()
	if d := t.TempDir(); !within(d, "/tmp") {
		return d
	}
	d, err := os.MkdirTemp("/var/tmp", "pw-test-")
	if err != nil {
		t.Fatalf("a directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// By default a command sees nothing around its workspace, nor the
// homes and secrets of the host, and ordinary programs still run.
func TestDefaultHiding(t *testing.T) {
	base := dirOutsideTmp(t)
	ws := filepath.Join(base, "a", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(base, "secret.txt"), filepath.Join(base, "a", "secret.txt")} {
		if err := os.WriteFile(f, []byte("NEIGHBOUR-SECRET"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := `cat ../secret.txt ../../secret.txt ` + base + `/secret.txt; ls .. ../..; echo shadow $(wc -c < /etc/shadow); ` +
		`echo root $(ls -A /root | wc -l) home $(ls -A /home | wc -l) run $(ls -A /run | wc -l); ` +
		`echo x > ../x; ls /usr/bin/env && perl -e 'print "perl ok\n"'`
	out, _ := runIn(t, Config{}, ws, cmd)
	if strings.Contains(out, "NEIGHBOUR-SECRET") || strings.Contains(out, "secret.txt\n") {
		t.Errorf("the workspace's surroundings are visible: %q", out)
	}
	for _, want := range []string{"shadow 0\n", "root 0 home 0 run 0\n", "/usr/bin/env\nperl ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in %q", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "a", "x")); err == nil {
		t.Errorf("the command wrote beside its workspace")
	}
	if got := Surroundings("/opt/ws"); got != "" {
		t.Errorf("Surroundings(/opt/ws) = %q, want none", got)
	}
	if got := Surroundings("/var/tmp/a/b/ws"); got != "/var/tmp" {
		t.Errorf("Surroundings(/var/tmp/a/b/ws) = %q, want /var/tmp", got)
	}
}
