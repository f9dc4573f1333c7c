//go:build linux

package workspace

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/tools"
	"golang.org/x/sys/unix"
)

// A command starts only once it shares the lock on the workspace's root
// that keeps commands and writes of the paths hidden from commands apart
// (tryLockHideShared); while another holds it exclusive (another process
// writing a hidden path there, or a program of the host), the command
// waits for it within its own bounds: its timeout answers it, with what
// held it up (ReasonRootLocked), and so does its context, and the command never runs.
// Meanwhile, the workspace's other calls go on: a write of a hidden path
// is answered (refused, the lock being held) rather than kept waiting.
// Once the lock is free, a command runs, and releases it as it ends.
func TestCommandStartWaitsForTheRootLockWithinItsBounds(t *testing.T) {
	requireSandbox(t)
	dir := dirWithHiddenEnv(t)
	opts := hiddenEnvOptions(dir)
	opts.CommandTimeout = 200 * time.Millisecond
	ws, err := New(dir, opts)
	mustDo(t, err)
	defer ws.Close()

	held, err := os.Open(dir)
	mustDo(t, err)
	defer held.Close()
	mustDo(t, unix.Flock(int(held.Fd()), unix.LOCK_EX|unix.LOCK_NB))

	// waiting is told when a command's start finds the lock held; it
	// waits then until goOn is closed.
	waiting, goOn := make(chan struct{}, 1), make(chan struct{})
	ws.hookHideLockWait = func() {
		waiting <- struct{}{}
		<-goOn
	}
	run := func(ctx context.Context) chan RunCommandResult {
		done := make(chan RunCommandResult, 1)
		go func() {
			res, err := ws.RunCommand(ctx, RunCommandInput{Command: "echo ran"})
			if err != nil {
				res.Error += "; " + err.Error()
			}
			done <- res
		}()
		return done
	}

	done := run(context.Background())
	<-waiting
	res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/.env", Content: "NEWSECRET"})
	mustDo(t, err)
	if res.Success || res.Reason != ReasonHiddenInUse || !strings.Contains(res.Error, "a program of the host") {
		t.Errorf("a write of a hidden path while a command waits for the lock held elsewhere: %+v; want it refused (%s), "+
			"saying a program of the host may hold the lock", res, ReasonHiddenInUse)
	}
	if res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "plain.txt", Content: "x"}); err != nil || !res.Success {
		t.Errorf("a write of a path not hidden while a command waits for the lock: %+v, %v", res, err)
	}
	close(goOn)
	cmd := <-done
	if !cmd.TimedOut || cmd.StoppedBy != StoppedByTimeout || cmd.Reason != ReasonRootLocked || cmd.Sandboxed ||
		strings.Contains(cmd.Stdout, "ran") || !strings.Contains(cmd.Error, "hidden from commands") {
		t.Errorf("a command whose start found the lock held past its timeout: %+v; want it timed out (%s), never run, saying what held it",
			cmd, ReasonRootLocked)
	}
	// Bound as a tool, it is a call that may be tried again, not the
	// tool's failure.
	if re := new(tools.ResultError); !errors.As(failedResult(cmd, cmd.Reason, cmd.Error), &re) || re.Kind != tools.FailureUnavailable {
		t.Errorf("a command whose start found the lock held past its timeout is not answered as unavailable: %v", failedResult(cmd, cmd.Reason, cmd.Error))
	}

	goOn = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done = run(ctx)
	<-waiting
	cancel()
	close(goOn)
	cmd = <-done
	if cmd.StoppedBy != StoppedByCancel || !strings.Contains(cmd.Error, context.Canceled.Error()) || strings.Contains(cmd.Stdout, "ran") {
		t.Errorf("a command cancelled while its start waits for the lock: %+v; want it cancelled, never run", cmd)
	}

	mustDo(t, unix.Flock(int(held.Fd()), unix.LOCK_UN))
	ws.hookHideLockWait = func() { t.Error("a command waited for a lock no one else holds") }
	if cmd := <-run(context.Background()); cmd.Stdout != "ran\n" || !cmd.Sandboxed || cmd.Error != "" {
		t.Errorf("a command once the lock is free: %+v", cmd)
	}
	if res, err := ws.WriteFile(context.Background(), WriteFileInput{Path: "cfg/.env", Content: "NEWSECRET"}); err != nil || !res.Success {
		t.Errorf("a write of a hidden path once no command runs: %+v, %v", res, err)
	}
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("the lock on the root is still held once no command runs")
	}
}
