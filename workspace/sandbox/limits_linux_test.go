//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
// private keys, Kerberos keytabs, Wi-Fi and PPP passwords.
func TestDefaultHidingOfHostCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writes secrets under /etc: needs root")
	}
	secrets := map[string]string{
		"/etc/wireguard":                         "WG-SECRET",
		"/etc/letsencrypt":                       "LE-SECRET",
		"/etc/NetworkManager/system-connections": "NM-SECRET",
	}
	var files []string
	for dir, secret := range secrets {
		// Only what this test makes is removed: a folder the host has
		// keeps everything but the test's file.
		made := ""
		for d := dir; d != "/etc"; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); os.IsNotExist(err) {
				made = d
			}
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, fmt.Sprintf("pw-sandbox-test-%d", os.Getpid()))
		if err := os.WriteFile(f, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		if made != "" {
			defer os.RemoveAll(made)
		} else {
			defer os.Remove(f)
		}
		files = append(files, f)
	}
	out, _ := runIn(t, Config{}, t.TempDir(), "cat "+strings.Join(files, " ")+" 2>&1; true")
	for _, secret := range secrets {
		if strings.Contains(out, secret) {
			t.Errorf("a sandboxed command read %s: %q", secret, out)
		}
	}
}
