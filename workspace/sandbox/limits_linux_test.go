//go:build linux

package sandbox

import "testing"

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
