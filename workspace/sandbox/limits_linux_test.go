//go:build linux

package sandbox

import (
	"fmt"
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

// The sandbox's /tmp holds as many files as it has pages, not an
// unbounded number of empty ones (each costs kernel memory that its
// size does not count).
func TestTmpInodesBounded(t *testing.T) {
	out, _ := runIn(t, Config{TmpSize: 1 << 20}, t.TempDir(),
		`i=0; while [ $i -lt 3000 ] && true 2>/dev/null > /tmp/f$i; do i=$((i+1)); done; echo made $i`)
	var made int
	if _, err := fmt.Sscanf(out, "made %d", &made); err != nil || made >= 3000 || made == 0 {
		t.Errorf("empty files made in a 1 MiB /tmp: %q, want some and fewer than 3000", out)
	}
}
