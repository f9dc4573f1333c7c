//go:build linux

package workspace

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A sandbox's helper that cannot fork the command's shell because the
// host ran out of processes or threads (EAGAIN: the host user's limit,
// the system's, a cgroup's; the sandbox's own limit, at least
// sandbox.MinProcesses, cannot refuse its first process) answers as a
// set-up that ran out of a resource does: the command never ran, the
// call is unavailable and may be tried again, and run_command's circuit
// breaker does not count it. It is logged as a warning. The helper's
// report is replaced here (hookFinished): the host's limits are not the
// test's to exhaust.
func TestTools_ShellForkEAGAINIsNotAToolFailure(t *testing.T) {
	requireSandbox(t)
	var logs lockedBuffer
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mustDo(t, err)
	defer ws.Close()
	var forkFails atomic.Bool
	forkFails.Store(true)
	ws.hookFinished = func(exit sandbox.Exit, err error) (sandbox.Exit, error) {
		if !forkFails.Load() {
			return exit, err
		}
		return sandbox.Exit{Code: -1}, fmt.Errorf("sandbox: start the command: fork/exec /bin/sh: %w: %w",
			syscall.EAGAIN, sandbox.ErrStartFailed)
	}
	call := breakerCalls(t, ws, 2)
	for n := range 2 {
		f := call(n)
		p := string(f.GetPayload())
		if !f.IsErrorResult() || tools.KindOf(f) != tools.FailureUnavailable {
			t.Errorf("call %d, its shell not forked for EAGAIN: %s, kind %q; want an error result of kind %q",
				n, p, tools.KindOf(f), tools.FailureUnavailable)
		}
		if !strings.Contains(p, "no more processes or threads could be started") || !strings.Contains(p, "never ran") ||
			!strings.Contains(p, "try again") {
			t.Errorf("call %d, its shell not forked for EAGAIN: %s; want it to say which resource ran out, "+
				"that the command never ran, and to try again", n, p)
		}
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "resource temporarily unavailable") {
		t.Errorf("the log at the warning level holds %q; want a warning that says why the shell was not forked", l)
	}
	forkFails.Store(false)
	f := call(2)
	var res RunCommandResult
	if err := json.Unmarshal(f.GetPayload(), &res); err != nil || f.IsErrorResult() || res.Stdout != "ran\n" {
		t.Errorf("a well-formed call after two whose shell was not forked: %s, kind %q (%v); want it run, not refused",
			f.GetPayload(), tools.KindOf(f), err)
	}
}
