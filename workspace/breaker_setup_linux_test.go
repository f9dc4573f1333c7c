//go:build linux

package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// A command whose sandbox was not ready within its timeout (a slow
// machine), or could not be set up for want of a resource
// (sandbox.ErrResources), never ran: its call is an
// error result, but not a failure of the tool, so it does not count
// against run_command's circuit breaker. Such calls in a row, with a
// breaker that opens at two failures, do not make the next well-formed
// call be refused as unavailable: it runs.
func TestTools_SetUpTimeoutIsNotAToolFailure(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, CommandTimeout: time.Second})
	mustDo(t, err)
	defer ws.Close()
	dropWarm(ws)
	const (
		hang = iota
		outOfResources
		ready
	)
	var mode atomic.Int32 // hang first
	ws.hookPrepare = func(ctx context.Context) error {
		switch mode.Load() {
		case hang:
			<-ctx.Done() // a set-up that hangs: ended by the call's timeout
			return ctx.Err()
		case outOfResources:
			return fmt.Errorf("create the namespaces: %w: %w", syscall.EAGAIN, sandbox.ErrResources)
		}
		return nil
	}
	call := breakerCalls(t, ws, 2)
	n := 0
	for _, c := range []struct {
		mode       int32
		why, holds string
	}{{hang, "was not ready within its timeout", "timed out"}, {outOfResources, "could not be set up for want of a resource", "no more processes or threads could be started"}} {
		mode.Store(c.mode)
		for range 2 {
			f := call(n)
			n++
			if !f.IsErrorResult() || tools.KindOf(f) != tools.FailureUnavailable || !strings.Contains(string(f.GetPayload()), c.holds) {
				t.Errorf("a call whose sandbox %s: %s, kind %q; want an error result of kind %q that says %q, not the tool's failure",
					c.why, f.GetPayload(), tools.KindOf(f), tools.FailureUnavailable, c.holds)
			}
			// The kind is the one of a call refused by an open breaker:
			// the message tells the two apart, and that this one may be
			// tried again at once.
			if p := string(f.GetPayload()); !strings.Contains(p, "its sandbox") || !strings.Contains(p, "never ran") ||
				!strings.Contains(p, "try again") || strings.Contains(p, "Tool "+RunCommandToolName) {
				t.Errorf("a call whose sandbox %s: %s; want a message that says the command never ran for want of its sandbox, "+
					"and to try again, unlike an open breaker's", c.why, p)
			}
		}
	}
	mode.Store(ready)
	// The last call's timeout, one second, is to cover the hand-over to a
	// sandbox set up ahead (without a bound: on a loaded machine a set-up
	// can take longer) and its command. Should the machine be too loaded
	// even for that, the command, which ran, was killed at its timeout: a
	// result that is not refused either, and the call is made again.
	for attempt := 1; ; attempt++ {
		putWarm(t, ws)
		f := call(n)
		n++
		var res RunCommandResult
		if err := json.Unmarshal(f.GetPayload(), &res); err != nil || f.IsErrorResult() || !res.Sandboxed ||
			res.Stdout != "ran\n" && (!res.TimedOut || attempt == 5) {
			t.Fatalf("a well-formed call after those whose sandbox could not be set up: %s, kind %q (%v); want it run",
				f.GetPayload(), tools.KindOf(f), err)
		}
		if res.Stdout == "ran\n" {
			break
		}
		t.Logf("the command ran past its %s timeout: trying again", ws.opts.CommandTimeout)
	}
}

// breakerCalls starts the tools of ws under a call runner whose
// breaker opens at failures failures within an hour, and returns a
// function that makes the n-th call, `echo ran`, on a stream of its own
// and returns its result frame.
func breakerCalls(t *testing.T, ws *Workspace, failures int) func(n int) *messages.Frame {
	t.Helper()
	all, err := Tools(ws)
	mustDo(t, err)
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: all,
		Breaker: tools.BreakerOptions{Failures: failures, Window: time.Hour, Cooldown: time.Hour}})
	mustDo(t, err)
	rt := actorstest.NewRuntime(t, nil)
	conn, err := rt.Start(spec)
	mustDo(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang, not on speed
	t.Cleanup(cancel)
	return func(n int) *messages.Frame {
		t.Helper()
		stream := "s" + strconv.Itoa(n)
		args, _ := json.Marshal(RunCommandInput{Command: "echo ran"})
		mustDo(t, conn.Send(messages.ToolCall(stream, "c", RunCommandToolName, args)))
		frames, err := conn.RecvStream(ctx, stream)
		mustDo(t, err)
		for _, f := range frames {
			if f.GetType() == messages.FrameType_TOOL_RESULT {
				return f
			}
		}
		t.Fatalf("call %d: no result in %v", n, frames)
		return nil
	}
}

// lockedBuffer is a bytes.Buffer that a logger may write from any
// goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A command whose sandbox could not be set up (not within its timeout,
// or for want of a resource) is answered unavailable, which no circuit
// breaker counts: were it so on every call (a set-up that always hangs,
// a resource that never comes back), the host would learn nothing from
// the breaker, so the workspace says it in its log, at the warning
// level, with why.
func TestRunCommand_SandboxNotSetUpIsLoggedAsAWarning(t *testing.T) {
	requireSandbox(t)
	var logs lockedBuffer
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired, CommandTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mustDo(t, err)
	defer ws.Close()
	dropWarm(ws)
	var resources atomic.Bool
	ws.hookPrepare = func(ctx context.Context) error {
		if resources.Load() {
			return fmt.Errorf("create the namespaces: %w: %w", syscall.EAGAIN, sandbox.ErrResources)
		}
		<-ctx.Done() // a set-up that hangs: ended by the call's timeout
		return ctx.Err()
	}
	for _, c := range []struct {
		resources bool
		why, says string
	}{{false, "was not ready within its timeout", "deadline exceeded"}, {true, "could not be set up for want of a resource", "resource temporarily unavailable"}} {
		resources.Store(c.resources)
		before := len(logs.String())
		res, err := ws.RunCommand(context.Background(), RunCommandInput{Command: "echo ran"})
		mustDo(t, err)
		if !res.notReady {
			t.Fatalf("a command whose sandbox %s: %+v; want it not ready", c.why, res)
		}
		logged := logs.String()[before:]
		if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "run_command") || !strings.Contains(logged, c.says) {
			t.Errorf("a command whose sandbox %s, answered unavailable: the log at the warning level holds %q; want a warning that says %q", c.why, logged, c.says)
		}
	}
}
