//go:build linux

package sandbox

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The host's terminals are out of a command's reach: a pty opened on
// the host (a user's terminal, whose keystrokes its slave reads) is not
// in the sandbox's /dev/pts, and the devices a command needs are, with
// pseudo-terminals of its own.
func TestHostTerminalsUnreachable(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("a host pty: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave := "/dev/pts/" + strconv.Itoa(n)
	if f, err := os.OpenFile(slave, os.O_RDWR|unix.O_NOCTTY, 0); err != nil {
		t.Fatalf("the host cannot open its own pty %s: %v", slave, err)
	} else {
		f.Close()
	}
	out, exit := runIn(t, Config{}, t.TempDir(), `
		(: <`+slave+`) 2>/dev/null && echo READ-HOST-PTY
		(: >>`+slave+`) 2>/dev/null && echo WROTE-HOST-PTY
		(: >>/dev/tty) 2>/dev/null && echo WROTE-TTY
		ls /dev/pts
		head -c 4 /dev/zero | wc -c; head -c 4 /dev/urandom | wc -c; echo x > /dev/null && echo null-ok
		(: <>/dev/ptmx) && echo own-ptmx-ok
		exit 0`)
	t.Logf("out=%q", out)
	if exit.Code != 0 {
		t.Fatalf("exit %+v", exit)
	}
	for _, bad := range []string{"READ-HOST-PTY", "WROTE-HOST-PTY", "WROTE-TTY"} {
		if strings.Contains(out, bad) {
			t.Errorf("a command reached a host terminal: %s", bad)
		}
	}
	for _, f := range strings.Fields(out) {
		if f == strconv.Itoa(n) {
			t.Errorf("the host pty %s is listed in the sandbox's /dev/pts: %q", slave, out)
		}
	}
	if strings.Count(out, "4\n") != 2 || !strings.Contains(out, "null-ok") || !strings.Contains(out, "own-ptmx-ok") {
		t.Errorf("the devices a command needs do not work: %q", out)
	}
}

// Shared memory works in the sandbox (shm_open, hence Python's
// multiprocessing locks and shared memory, uses /dev/shm): its /dev/shm
// is a writable tmpfs of its own, where the host's shared memory is not.
func TestSharedMemoryOfItsOwn(t *testing.T) {
	host := "/dev/shm/pw-sandbox-shm-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(host, []byte("HOST-SHM"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(host)
	cmd := `cat ` + host + ` 2>/dev/null; echo host-files $(ls -A /dev/shm | wc -l)
		echo shm-data > /dev/shm/x && cat /dev/shm/x`
	python := false
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		python = true
		cmd += `
		/usr/bin/python3 -c '
from multiprocessing import Lock, shared_memory
with Lock():
    m = shared_memory.SharedMemory(create=True, size=16)
    m.buf[:6] = b"shared"
    n = shared_memory.SharedMemory(name=m.name)
    print("python", bytes(n.buf[:6]).decode())
    n.close(); m.close(); m.unlink()
'`
	}
	out, exit := runIn(t, Config{}, t.TempDir(), cmd)
	if strings.Contains(out, "HOST-SHM") {
		t.Errorf("the host's shared memory is visible in the sandbox: %q", out)
	}
	if !strings.Contains(out, "host-files 0\n") {
		t.Errorf("the sandbox's /dev/shm is not empty at first: %q", out)
	}
	if !strings.Contains(out, "shm-data\n") {
		t.Errorf("a file could not be written to /dev/shm and read back: %q", out)
	}
	if python && !strings.Contains(out, "python shared\n") {
		t.Errorf("Python's multiprocessing shared memory fails in the sandbox: %q (exit %+v)", out, exit)
	}
}
