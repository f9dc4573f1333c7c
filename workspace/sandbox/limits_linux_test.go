//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The command cannot kill or crash the helper, PID 1 of its namespace,
// with any signal: not even those the Go runtime treats as a crash when
// it causes them itself (SIGSEGV, SIGABRT, …).
func TestHelperSurvivesSignals(t *testing.T) {
	cmd := `for s in $(seq 1 64); do kill -$s 1 2>/dev/null; done; echo alive`
	out, exit := runIn(t, Config{}, t.TempDir(), cmd)
	if exit.Code != 0 || out != "alive\n" {
		t.Errorf("after signalling PID 1: exit %+v, output %q", exit, out)
	}
}

// The command runs with RLIMIT_NOFILE at its configured value (default
// DefaultMaxOpenFiles), soft and hard.
func TestOpenFilesLimit(t *testing.T) {
	for _, tc := range []struct {
		limits Limits
		want   int
	}{{Limits{}, DefaultMaxOpenFiles}, {Limits{MaxOpenFiles: 100}, 100}} {
		for _, as := range []int64{0, 64 << 20} { // the helper's own limits, and the shell's set through ptrace
			l := tc.limits
			l.MaxAddressSpace = as
			out, _ := runIn(t, Config{Limits: l}, t.TempDir(), `ulimit -n; ulimit -Hn`)
			if want := fmt.Sprintf("%d\n%d\n", tc.want, tc.want); out != want {
				t.Errorf("limits %+v: ulimit -n, -Hn = %q, want %q", l, out, want)
			}
		}
	}
	if _, err := (Limits{MaxOpenFiles: -1}).WithDefaults(); err == nil {
		t.Error("a negative MaxOpenFiles was accepted")
	}
}

// The sandbox's /tmp and /dev/shm each hold as many files as they have
// pages, not an unbounded number of empty ones (each costs kernel
// memory that the size does not count), and no more bytes than TmpSize.
func TestTmpInodesBounded(t *testing.T) {
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		out, _ := runIn(t, Config{TmpSize: 1 << 20}, t.TempDir(),
			`i=0; while [ $i -lt 3000 ] && true 2>/dev/null > `+dir+`/f$i; do i=$((i+1)); done; echo made $i
			rm -f `+dir+`/f*; head -c 2097152 /dev/zero > `+dir+`/big 2>/dev/null; echo big $(wc -c < `+dir+`/big)`)
		var made, big int
		if _, err := fmt.Sscanf(out, "made %d\nbig %d", &made, &big); err != nil || made >= 3000 || made == 0 {
			t.Errorf("empty files made in a 1 MiB %s: %q, want some and fewer than 3000", dir, out)
		}
		if big > 1<<20 {
			t.Errorf("%d bytes written to a 1 MiB %s", big, dir)
		}
	}
}

// The host's shared memory and message queues (not in the sandbox's
// /dev), logs, spools, backups and private TLS keys are hidden by
// default.
func TestDefaultHidingOfHostState(t *testing.T) {
	shm := fmt.Sprintf("/dev/shm/pw-sandbox-test-%d", os.Getpid())
	if err := os.WriteFile(shm, []byte("SHM-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(shm)
	var want []string
	for _, p := range []string{"/dev/shm", "/var/log", "/var/spool", "/var/backups", "/etc/ssl/private", "/dev/mqueue"} {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			want = append(want, p)
		}
	}
	cmd := `for d in ` + strings.Join(want, " ") + `; do echo $d $(ls -A $d | wc -l); done; cat /etc/security/opasswd 2>/dev/null | wc -c`
	out, _ := runIn(t, Config{}, t.TempDir(), cmd)
	for _, p := range want {
		if !strings.Contains(out, p+" 0\n") {
			t.Errorf("%s is not hidden: %q", p, out)
		}
	}
	if strings.Contains(out, "SHM-SECRET") || !strings.HasSuffix(out, "\n0\n") {
		t.Errorf("host state visible: %q", out)
	}
}

// Well-known places of the host's credentials under /etc, which only
// root may read and which a host running as root would otherwise show
// its commands, are hidden by default: VPN and IPsec keys, certificates'
// private keys, Kerberos keytabs, Wi-Fi and PPP passwords. The test runs
// itself in a child process with a mount namespace of its own, where a
// tmpfs covers /etc: the secrets it writes there never reach the host's
// /etc.
func TestDefaultHidingOfHostCredentials(t *testing.T) {
	if os.Getenv("PW_SANDBOX_ETC_CHILD") == "1" {
		hostCredentialsChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mounts an /etc of its own in a mount namespace: needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultHidingOfHostCredentials$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "PW_SANDBOX_ETC_CHILD=1")
	// Go makes the child's mounts private, so its /etc stays its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDefaultHidingOfHostCredentials") {
		t.Fatalf("the test in a mount namespace of its own: %v\n%s", err, out)
	}
}

func hostCredentialsChild(t *testing.T) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make the child's mounts private: %v", err)
	}
	if err := unix.Mount("tmpfs", "/etc", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		t.Fatalf("cover /etc with a tmpfs of the child's own: %v", err)
	}
	secrets := map[string]string{
		"/etc/wireguard":                         "WG-SECRET",
		"/etc/letsencrypt":                       "LE-SECRET",
		"/etc/NetworkManager/system-connections": "NM-SECRET",
	}
	var files []string
	for dir, secret := range secrets {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "secret")
		if err := os.WriteFile(f, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out, _ := runIn(t, Config{}, t.TempDir(), "cat "+strings.Join(files, " ")+" 2>&1; true")
	for _, secret := range secrets {
		if strings.Contains(out, secret) {
			t.Errorf("a sandboxed command read %s: %q", secret, out)
		}
	}
	// The files are there, and readable but for the sandbox.
	for _, f := range files {
		if _, err := os.ReadFile(f); err != nil {
			t.Errorf("the test's own secret %s: %v", f, err)
		}
	}
}
