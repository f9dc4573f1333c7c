//go:build linux

package workspace

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/tools"
)

// exhaustDescriptors makes every further open of this process fail with
// EMFILE until the returned function is called: the soft limit on open
// files is lowered to the descriptors in use, and the free numbers below
// it are taken.
func exhaustDescriptors(t *testing.T) (restore func()) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	mustDo(t, err)
	highest := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			highest = max(highest, n)
		}
	}
	var old syscall.Rlimit
	mustDo(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	lowered := old
	lowered.Cur = uint64(highest) + 1
	mustDo(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered))
	var held []int
	for {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			if err != syscall.EMFILE {
				t.Fatalf("filling the descriptor table: %v", err)
			}
			break
		}
		held = append(held, fd)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		for _, fd := range held {
			syscall.Close(fd)
		}
		mustDo(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old))
	}
	t.Cleanup(restore)
	return restore
}

// A command that could not start because this process ran out of
// descriptors for the command's output pipes is, like a sandbox not set
// up for want of a resource (sandbox.ErrResources), answered
// unavailable, which the circuit breaker does not count: the tool is not
// broken, the call may succeed later. Its message says which resource
// ran out and names no host path.
func TestRunCommand_OwnDescriptorsRunOutIsNotAToolFailure(t *testing.T) {
	for _, mode := range []SandboxMode{SandboxOff, SandboxRequired} {
		t.Run(map[SandboxMode]string{SandboxOff: "unsandboxed", SandboxRequired: "sandboxed"}[mode], func(t *testing.T) {
			if mode == SandboxRequired {
				requireSandbox(t)
			}
			dir := t.TempDir()
			ws, err := New(dir, &Options{Sandbox: mode})
			mustDo(t, err)
			defer ws.Close()
			dropWarm(ws)
			restore := exhaustDescriptors(t)
			res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
			restore()
			if err != nil || res.Success || res.Reason != ReasonStartFailed {
				t.Fatalf("RunCommand with no descriptor free: %+v, %v; want the start failed", res, err)
			}
			if !strings.Contains(res.Error, "open") || !strings.Contains(res.Error, syscall.EMFILE.Error()) {
				t.Errorf("message %q does not say the process ran out of open files", res.Error)
			}
			if strings.Contains(res.Error, dir) || strings.Contains(res.Error, "/") {
				t.Errorf("message %q names a host path", res.Error)
			}
			var re *tools.ResultError
			if !errors.As(failedResult(res, res.Reason, res.Error), &re) || re.Kind != tools.FailureUnavailable {
				t.Errorf("kind %v; want %v, which the circuit breaker does not count", re.Kind, tools.FailureUnavailable)
			}
		})
	}
}
