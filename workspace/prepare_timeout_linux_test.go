//go:build linux

package workspace

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// slowPreparation makes ws's sandbox preparations from now on wait
// until their context ends, as a set-up that hangs does, and say so. A
// preparation not bounded by a context would wait for ever: backstop
// ends it after a while instead, so that such a test fails rather than
// hangs. It counts the preparations that ended with their context, and
// those the backstop ended.
func slowPreparation(t *testing.T, ws *Workspace) (ended, unbounded *atomic.Int64) {
	t.Helper()
	backstop := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(backstop) })
	t.Cleanup(func() { timer.Stop() })
	ended, unbounded = new(atomic.Int64), new(atomic.Int64)
	ws.hookPrepare = func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			ended.Add(1)
			return ctx.Err()
		case <-backstop:
			unbounded.Add(1)
			return errors.New("the preparation was never bounded (backstop)")
		}
	}
	return ended, unbounded
}

// dropWarm releases the sandbox New kept for the first command, so that
// the next command prepares its own.
func dropWarm(ws *Workspace) {
	ws.warmMu.Lock()
	h := ws.warm
	ws.warm = nil
	ws.warmMu.Unlock()
	if h != nil {
		h.release()
	}
}

// putWarm sets a sandbox up for the next command, with no bound on how
// long that takes (on a loaded machine it can take longer than a short
// CommandTimeout), and keeps it for that command, as New keeps the one
// it probes with.
func putWarm(t *testing.T, ws *Workspace) {
	t.Helper()
	h, err := ws.prepare(context.Background())
	mustDo(t, err)
	ws.warmMu.Lock()
	h, ws.warm = ws.warm, h
	ws.warmMu.Unlock()
	if h != nil {
		h.release()
	}
}

// The command's timeout covers the preparation of its sandbox: a
// preparation that hangs is given up at the command's deadline, the call
// answers that the command timed out (it never ran), and Close does not
// wait for the preparation.
func TestRunCommand_TimeoutCoversPreparation(t *testing.T) {
	requireSandbox(t)
	for _, c := range []struct {
		name string
		// ahead: the hanging preparation is the one run_command started
		// for the next command, which this one waits for.
		ahead bool
	}{{"its own", false}, {"prepared ahead", true}} {
		t.Run(c.name, func(t *testing.T) {
			ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, CommandTimeout: 2 * time.Second})
			mustDo(t, err)
			defer ws.Close()
			var unbounded *atomic.Int64
			if c.ahead {
				_, unbounded = slowPreparation(t, ws)
				waited := make(chan struct{})
				ws.hookWaitPrepared = func() { close(waited) }
				runSandboxed(t, ws, "true") // takes New's sandbox, then prepares the next one
				res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
				select {
				case <-waited:
				default:
					t.Fatal("the command did not wait for the preparation under way")
				}
				checkTimedOutBeforeStart(t, ws, res, err)
			} else {
				dropWarm(ws)
				var ended *atomic.Int64
				ended, unbounded = slowPreparation(t, ws)
				res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
				checkTimedOutBeforeStart(t, ws, res, err)
				if ended.Load() != 1 {
					t.Errorf("%d preparations ended with their context, want the command's", ended.Load())
				}
			}
			// Close ends the preparation still under way (the next
			// command's, which hangs too) rather than wait for it.
			mustDo(t, ws.Close())
			if n := unbounded.Load(); n != 0 {
				t.Errorf("%d preparations went on until the backstop", n)
			}
		})
	}
}

func checkTimedOutBeforeStart(t *testing.T, ws *Workspace, res RunCommandResult, err error) {
	t.Helper()
	if err != nil || res.Success || !res.TimedOut || res.StoppedBy != StoppedByTimeout || res.Stdout != "" ||
		!strings.Contains(res.Error, "timed out") || !strings.Contains(res.Error, ws.opts.CommandTimeout.String()) {
		t.Errorf("a command whose sandbox was not ready within its timeout: %+v, %v; want it timed out before it started", res, err)
	}
}

// run_command's own tool timeout (a backstop) comes after the
// workspace's: the command's timeout, the kill grace and the wait for
// the output, so that the call is answered by the workspace, with what
// the command printed, before it.
func TestTools_RunCommandTimeoutIsABackstop(t *testing.T) {
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxOff, CommandTimeout: 5 * time.Second,
		KillGrace: 2 * time.Second, WaitDelay: 3 * time.Second})
	mustDo(t, err)
	defer ws.Close()
	ts, err := Tools(ws)
	mustDo(t, err)
	for _, tool := range ts {
		if tool.Name() != RunCommandToolName {
			continue
		}
		got := tool.Description().TimeoutMs
		if bound := int64(10_000); got <= bound {
			t.Errorf("run_command's tool timeout is %d ms, want one past the workspace's bound, %d ms", got, bound)
		}
	}
}

// Close ends a command's own sandbox set-up under way, as it ends the
// one prepared ahead and a command's wait for it: Close does not wait
// for the command's timeout (an hour here), and the call returns
// ErrClosed, its command never run.
func TestClose_EndsACommandsSetUp(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, CommandTimeout: time.Hour})
	mustDo(t, err)
	defer ws.Close()
	dropWarm(ws)
	ended, unbounded := slowPreparation(t, ws)
	inner := ws.hookPrepare
	entered := make(chan struct{})
	var once sync.Once
	ws.hookPrepare = func(ctx context.Context) error {
		once.Do(func() { close(entered) })
		return inner(ctx)
	}
	type out struct {
		res RunCommandResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
		done <- out{res, err}
	}()
	<-entered
	mustDo(t, ws.Close())
	o := <-done
	if n := unbounded.Load(); n != 0 || ended.Load() != 1 {
		t.Errorf("Close did not end the command's sandbox set-up: %d went on until the backstop, %d ended with their context", n, ended.Load())
	}
	if !errors.Is(o.err, ErrClosed) || o.res.Success || o.res.StoppedBy != StoppedByClose || o.res.Stdout != "" || o.res.TimedOut {
		t.Errorf("RunCommand whose set-up was under way at Close: %+v, %v; want ErrClosed, the command never run", o.res, o.err)
	}
}

// Close ends a command's hand-over to its sandbox under way, as it ends
// its set-up: here the helper of the sandbox New kept is stopped, so it
// never answers. The call returns ErrClosed at once, not at its timeout,
// and the helper is killed and reaped before Close returns.
func TestClose_EndsACommandsHandOver(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, CommandTimeout: 10 * time.Second})
	mustDo(t, err)
	defer ws.Close()
	mustDo(t, ws.Warm(context.Background()))
	ws.warmMu.Lock()
	h := ws.warm
	ws.warmMu.Unlock()
	if h == nil {
		t.Fatal("no sandbox ready after Warm")
	}
	pid := h.sb.Cmd.Process.Pid
	mustDo(t, syscall.Kill(pid, syscall.SIGSTOP))
	handing := make(chan struct{})
	ws.hookHandOver = func() { close(handing) }
	type out struct {
		res RunCommandResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
		done <- out{res, err}
	}()
	<-handing
	mustDo(t, ws.Close())
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("helper %d not reaped when Close returned: kill(0) = %v", pid, err)
	}
	o := <-done
	if !errors.Is(o.err, ErrClosed) || o.res.Success || o.res.StoppedBy != StoppedByClose || o.res.Stdout != "" || o.res.TimedOut {
		t.Errorf("RunCommand handed to its sandbox at Close: %+v, %v; want ErrClosed, the command never run", o.res, o.err)
	}
}

// The answer of a command whose sandbox was not ready in time says what
// is known: the step that did not finish, the timeout and the option that
// sets it; not a guess at why.
func TestRunCommand_NotReadyMessageSaysWhatIsKnown(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, CommandTimeout: 2 * time.Second})
	mustDo(t, err)
	defer ws.Close()
	dropWarm(ws)
	slowPreparation(t, ws)
	res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
	checkTimedOutBeforeStart(t, ws, res, err)
	for _, want := range []string{"sandbox", "was not set up", "2s", "Options.CommandTimeout", "never ran"} {
		if !strings.Contains(res.Error, want) {
			t.Errorf("message %q does not say %q", res.Error, want)
		}
	}
	if strings.Contains(res.Error, "slow or busy") {
		t.Errorf("message %q guesses why", res.Error)
	}
}
