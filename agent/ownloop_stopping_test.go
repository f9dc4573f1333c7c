package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// stoppingRun is a Stream of a durable conversation whose own loop
// crashed once (at its first tool result) and was stopped for good by
// its supervisor, and is stopping until release: its model child
// finishes only then.
type stoppingRun struct {
	release  func()             // the model child finishes, and the old loop stops
	cancel   context.CancelFunc // ends the Run's ctx
	restarts atomic.Int64
	done     chan stoppingOutcome // the Stream's last event and error
}

type stoppingOutcome struct {
	last agent.Event
	err  error
}

// startStoppingRun starts the Stream in t's synctest bubble and returns
// once every goroutine waits (synctest.Wait): the loop has crashed and
// is stopping, and the Run has not returned.
func startStoppingRun(t *testing.T) *stoppingRun {
	t.Helper()
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts})})
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	release := make(chan struct{})
	r := &stoppingRun{release: sync.OnceFunc(func() { close(release) }), done: make(chan stoppingOutcome, 1)}
	t.Cleanup(r.release)
	spec := model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "Done."},
	)
	inner := spec.New
	spec.New = func() actors.Logic { return slowEnd{Logic: inner(), release: release} }
	var crashed atomic.Bool
	a := newAgent(t, rt, spec, &agent.Options{Name: "own", Store: store, Tools: []*tools.Tool{echo(nil)},
		OnToolResult: func(tools.ToolResultEvent) {
			if crashed.CompareAndSwap(false, true) {
				panic("injected: the loop crashed")
			}
		}})
	ctx, cancel := context.WithCancel(testCtx(t))
	t.Cleanup(cancel)
	r.cancel = cancel
	go func() {
		var out stoppingOutcome
		for ev, err := range a.Stream(ctx, "s1", ask) {
			if ev.Kind == agent.EventRestart {
				r.restarts.Add(1)
			}
			out = stoppingOutcome{last: ev, err: err}
		}
		r.done <- out
	}()
	synctest.Wait() // the crashed loop is stopping: nothing else can happen
	if !crashed.Load() {
		t.Fatal("the loop did not crash: the test tests nothing")
	}
	select {
	case out := <-r.done:
		t.Fatalf("the Run returned while its old loop was stopping, after %d restarts: %v", r.restarts.Load(), out.err)
	default:
	}
	return r
}

// TestRun_OwnLoopStoppingIsWaitedFor: a durable conversation's own loop
// crashes and is stopping (see startStoppingRun). The attempt after the
// crash is refused as stopped, and the attempts do not go on failing so
// against the stopping loop until MaxAttempts (the default, 3) are used
// up: the next one waits for that loop to stop (the Run has not returned
// when every goroutine waits), then resumes the session on a fresh loop
// and answers.
func TestRun_OwnLoopStoppingIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t)
		r.release()
		out := <-r.done
		if out.err != nil || out.last.Kind != agent.EventDone || out.last.Answer.Text != "Done." {
			t.Fatalf("after the old loop stopped: %+v, %v (after %d restarts), want the answer %q", out.last, out.err, r.restarts.Load(), "Done.")
		}
	})
}

// TestRun_OwnLoopStoppingWaitEndsWithCtx: the wait for a stopping own
// loop (see TestRun_OwnLoopStoppingIsWaitedFor) is bounded by the Run's
// ctx: cancelled while the old loop still stops, the Run returns ctx's
// error.
func TestRun_OwnLoopStoppingWaitEndsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t)
		r.cancel()
		out := <-r.done
		if !errors.Is(out.err, context.Canceled) {
			t.Fatalf("the Run cancelled while its old loop stopped: %v (after %d restarts), want context.Canceled", out.err, r.restarts.Load())
		}
	})
}
