//go:build linux

package workspace

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/workspace/internal/sandboxhook"
)

// awaitFD waits until fd is ready for events, and returns false when
// the helper's pidfd says it exited first, which fails t unless
// expected says that may be.
func awaitFD(t *testing.T, fd int, events int16, pidfd int, expected func() bool) bool {
	t.Helper()
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}, {Fd: int32(pidfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			t.Errorf("poll: %v", err)
			return false
		}
		if fds[0].Revents != 0 {
			return true
		}
		if fd != pidfd && fds[1].Revents != 0 {
			if expected == nil || !expected() {
				t.Errorf("the sandbox's helper exited before the command wrote to the FIFO")
			}
			return false
		}
	}
}

// atCommandStart sets sandboxhook.Checked, until t's cleanup, for the
// next command: once the helper said it starts the command, the hook
// waits until the command wrote to the FIFO fifo (when the helper exits
// first, expected, given the start's context, says whether that may
// be), calls act with the start's context and a pidfd of the helper,
// and waits until the helper exited. It returns where it puts the
// helper's pid, 0 until then.
func atCommandStart(t *testing.T, fifo int, expected func(context.Context) bool, act func(ctx context.Context, pidfd int)) *int {
	helper := new(int)
	sandboxhook.Checked = func(ctx context.Context, pid int) {
		sandboxhook.Checked = nil
		*helper = pid
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Errorf("pidfd_open: %v", err)
			return
		}
		defer unix.Close(pidfd)
		if !awaitFD(t, fifo, unix.POLLIN, pidfd, func() bool { return expected != nil && expected(ctx) }) {
			return
		}
		act(ctx, pidfd)
		awaitFD(t, pidfd, unix.POLLIN, pidfd, nil)
	}
	t.Cleanup(func() { sandboxhook.Checked = nil })
	return helper
}

// A call that times out, or is cancelled or closed, just as the sandbox's helper
// starts the command (it has answered that it does, and the host has
// not yet acted on the answer) does not say the command never ran: the
// command did run (here it got as far as writing to a FIFO, which the
// test waits for before it ends the call). It is answered as a command
// killed at its timeout, cancellation or close (every process of it died with
// the helper, before the host acted on the helper's answer).
func TestRunCommand_EndedAsTheCommandStarts(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name string
		// timeout is the command's: the time for the hand-over to the
		// sandbox and the command's start, then to the test's end of
		// the call, which a timeout ends at it.
		timeout time.Duration
		// end ends the call (ctx is the start's context, which ends
		// with it; cancel the call's, ws its workspace).
		end func(ctx context.Context, cancel context.CancelFunc, ws *Workspace)
		// check checks the call's outcome.
		check func(t *testing.T, res RunCommandResult, err error)
	}{
		{"timeout", 2 * time.Second, func(ctx context.Context, _ context.CancelFunc, _ *Workspace) { <-ctx.Done() },
			func(t *testing.T, res RunCommandResult, err error) {
				if err != nil || !res.TimedOut || res.StoppedBy != StoppedByTimeout || res.ExitCode != TimeoutExitCode {
					t.Errorf("got %+v, %v; want a command killed at its timeout", res, err)
				}
			}},
		{"cancel", time.Minute, func(_ context.Context, cancel context.CancelFunc, _ *Workspace) { cancel() },
			func(t *testing.T, res RunCommandResult, err error) {
				if !errors.Is(err, context.Canceled) || res.StoppedBy != StoppedByCancel || res.TimedOut {
					t.Errorf("got %+v, %v; want a command killed as it was cancelled", res, err)
				}
			}},
		{"close", time.Minute, func(_ context.Context, _ context.CancelFunc, ws *Workspace) { go ws.Close() },
			func(t *testing.T, res RunCommandResult, err error) {
				if !errors.Is(err, ErrClosed) || res.StoppedBy != StoppedByClose || res.TimedOut {
					t.Errorf("got %+v, %v; want a command killed as its workspace closed", res, err)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ws, err := New(dir, &Options{Sandbox: SandboxRequired, CommandTimeout: c.timeout})
			mustDo(t, err)
			defer ws.Close()
			mustDo(t, ws.Warm(context.Background())) // the call's time goes to its command
			started := filepath.Join(dir, "started")
			mustDo(t, unix.Mkfifo(started, 0o600))
			fifo, err := unix.Open(started, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			mustDo(t, err)
			defer unix.Close(fifo)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The host gives the helper up: it is killed (and with it
			// the command) before the host acts on its answer. On a
			// loaded machine the timeout may come before the command
			// wrote: that is the same window, the helper having said it
			// starts the command.
			helper := atCommandStart(t, fifo, func(ctx context.Context) bool { return c.name == "timeout" && ctx.Err() != nil },
				func(ctx context.Context, _ int) { c.end(ctx, cancel, ws) })
			res, err := ws.RunCommand(ctx, RunCommandInput{Command: "echo ran > started; exec sleep 600"})
			if *helper == 0 {
				t.Fatalf("the command was never handed to a sandbox: %+v, %v", res, err)
			}
			if strings.Contains(res.Error, "never ran") || strings.Contains(res.Error, "before") {
				t.Errorf("the result says the command never ran, and it did: %+v, %v", res, err)
			}
			if !res.Success || !res.Sandboxed {
				t.Errorf("a command that ran is answered as one that did not: %+v", res)
			}
			c.check(t, res, err)
			// The helper was dead before the host acted on its answer
			// (the hook waited for that); Close has it reaped.
			mustDo(t, ws.Close())
			if err := syscall.Kill(*helper, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("helper %d not reaped when Close returned: kill(0) = %v", *helper, err)
			}
		})
	}
}

// A sandbox's helper that dies just as it starts the command (killed
// from outside here, once the command wrote to a FIFO), the call going
// on, is answered as a sandbox that failed with everything in it, not
// as a command that never ran; the workspace runs the next command.
func TestRunCommand_HelperDiesAsTheCommandStarts(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, CommandTimeout: time.Minute})
	mustDo(t, err)
	defer ws.Close()
	started := filepath.Join(dir, "started")
	mustDo(t, unix.Mkfifo(started, 0o600))
	fifo, err := unix.Open(started, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	mustDo(t, err)
	defer unix.Close(fifo)
	helper := atCommandStart(t, fifo, nil, func(_ context.Context, pidfd int) {
		if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
			t.Errorf("kill the helper: %v", err)
		}
	})
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran > started; exec sleep 600"})
	if *helper == 0 {
		t.Fatalf("the command was never handed to a sandbox: %+v, %v", res, err)
	}
	if err != nil || strings.Contains(res.Error, "never ran") || !res.Sandboxed || res.StoppedBy != StoppedBySandbox ||
		res.Signal != "SIGKILL" {
		t.Errorf("a command whose helper died as it started: %+v, %v; want the sandbox failed with everything in it", res, err)
	}
	if res := runSandboxed(t, ws, "echo next"); res.Stdout != "next\n" {
		t.Errorf("the command after: %+v", res)
	}
	mustDo(t, ws.Close())
	if err := syscall.Kill(*helper, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("helper %d not reaped when Close returned: kill(0) = %v", *helper, err)
	}
}
