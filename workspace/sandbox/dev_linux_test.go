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
