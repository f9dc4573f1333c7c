package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// stoppingRun is a Stream of a durable conversation whose own loop
// crashed once (at its first tool result) and was stopped for good by
// its supervisor, and is stopping until release: its model child
// finishes only then.
type stoppingRun struct {
	a        *agent.Agent
	release  func()             // the model child finishes, and the old loop stops
	cancel   context.CancelFunc // ends the Run's ctx
	restarts atomic.Int64
	models   atomic.Int64         // the model children started, by any loop of the agent
	done     chan stoppingOutcome // the Stream's last event and error
}

type stoppingOutcome struct {
	last agent.Event
	err  error
}

// startStoppingRun starts the Stream, with a ctx of parent, in t's
// synctest bubble and returns once every goroutine waits
// (synctest.Wait): the loop has crashed and is stopping, and the Run has
// not returned.
func startStoppingRun(t *testing.T, parent context.Context) *stoppingRun {
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
	spec.New = func() actors.Logic { r.models.Add(1); return slowEnd{Logic: inner(), release: release} }
	var crashed atomic.Bool
	r.a = newAgent(t, rt, spec, &agent.Options{Name: "own", Store: store, Tools: []*tools.Tool{echo(nil)},
		OnToolResult: func(tools.ToolResultEvent) {
			if crashed.CompareAndSwap(false, true) {
				panic("injected: the loop crashed")
			}
		}})
	// Again, to run before the agent's Close (cleanups run last first):
	// Close waits for the old loop to stop.
	t.Cleanup(r.release)
	ctx, cancel := context.WithCancel(parent)
	t.Cleanup(cancel)
	r.cancel = cancel
	go func() {
		var out stoppingOutcome
		for ev, err := range r.a.Stream(ctx, "s1", ask) {
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
// and answers, with the call of the crashed loop answered.
func TestRun_OwnLoopStoppingIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t, testCtx(t))
		r.release()
		out := <-r.done
		if out.err != nil || out.last.Kind != agent.EventDone || out.last.Answer.Text != "Done." {
			t.Fatalf("after the old loop stopped: %+v, %v (after %d restarts), want the answer %q", out.last, out.err, r.restarts.Load(), "Done.")
		}
		ans := out.last.Answer
		if ans.ToolCalls() == 0 {
			t.Errorf("no calls in the answer: %+v", ans)
		}
		for i, rd := range ans.Rounds {
			if !rd.Complete() {
				t.Errorf("round %d: %d calls, %d results", i, len(rd.Calls), len(rd.Results))
			}
		}
	})
}

// TestRun_OwnLoopStoppingSecondRunBusy: while a Run waits for its
// stopping own loop, another Run of the session is refused at once with
// ErrSessionBusy, and the first goes on once the loop has stopped.
func TestRun_OwnLoopStoppingSecondRunBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t, testCtx(t))
		if _, err := r.a.Run(testCtx(t), "s1", ask); !errors.Is(err, agent.ErrSessionBusy) {
			t.Errorf("a second Run while the first waits: %v, want ErrSessionBusy", err)
		}
		r.release()
		if out := <-r.done; out.err != nil || out.last.Answer.Text != "Done." {
			t.Errorf("first Run: %+v, %v", out.last, out.err)
		}
	})
}

// TestRun_OwnLoopStoppingWaitEndsWithClose: a Run whose ctx has no
// deadline waits for its own loop, which does not finish stopping. Close
// ends that wait, as it ends a wait for a drain: the Run returns
// ErrClosed. Close waits for the Run, then for the loop, which persists
// the session while it stops: its ctx ends first, and it returns ctx's
// error; once the loop has stopped, a later Close returns nil.
func TestRun_OwnLoopStoppingWaitEndsWithClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t, context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.a.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close while a Run waits for its stopping own loop: %v, want ctx's error (the loop still stops)", err)
		}
		synctest.Wait()
		if !endedByClose(t, r.done, func(o stoppingOutcome) error { return o.err }, "its stopping loop") {
			r.release()
			<-r.done
		}
		r.release()
		if err := r.a.Close(context.Background()); err != nil {
			t.Errorf("Close once the loop can stop: %v", err)
		}
	})
}

// endedByClose reports whether the Run whose outcome done gives has
// returned, and fails t unless it has, with ErrClosed: Close has begun
// while the Run waited for what waits says.
func endedByClose[T any](t *testing.T, done <-chan T, errOf func(T) error, waits string) bool {
	t.Helper()
	select {
	case out := <-done:
		if err := errOf(out); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("the Run ended by Close: %v, want ErrClosed", err)
		}
		return true
	default:
		t.Errorf("the Run still waits for %s after Close began", waits)
		return false
	}
}

// TestRun_OwnLoopStoppingWaitedForByNextRun: a Run cancelled while it
// waits for its stopping own loop returns; the next Run of the session
// waits for that loop too, starting no loop beside it (no model child
// started while every goroutine waits), and once it has stopped resumes
// the session on a fresh loop and answers.
func TestRun_OwnLoopStoppingWaitedForByNextRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t, context.Background())
		r.cancel()
		if out := <-r.done; !errors.Is(out.err, context.Canceled) {
			t.Fatalf("the Run cancelled while its old loop stopped: %v, want context.Canceled", out.err)
		}
		before := r.models.Load()
		next := make(chan error, 1)
		var ans *models.Answer
		go func() {
			var err error
			ans, err = r.a.Run(context.Background(), "s1", ask)
			next <- err
		}()
		synctest.Wait()
		if n := r.models.Load() - before; n > 0 {
			t.Errorf("the next Run of the session started %d model(s) while the old loop was still stopping", n)
		}
		select {
		case err := <-next:
			t.Fatalf("the next Run returned while the old loop was stopping: %v", err)
		default:
		}
		r.release()
		if err := <-next; err != nil || ans.Text != "Done." {
			t.Errorf("the next Run once the old loop stopped: %+v, %v, want the answer %q", ans, err, "Done.")
		}
	})
}

// TestRun_OwnLoopStoppingWaitEndsWithCtx: the wait for a stopping own
// loop (see TestRun_OwnLoopStoppingIsWaitedFor) is bounded by the Run's
// ctx: cancelled while the old loop still stops, the Run returns ctx's
// error.
func TestRun_OwnLoopStoppingWaitEndsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t, testCtx(t))
		r.cancel()
		out := <-r.done
		if !errors.Is(out.err, context.Canceled) {
			t.Fatalf("the Run cancelled while its old loop stopped: %v (after %d restarts), want context.Canceled", out.err, r.restarts.Load())
		}
	})
}

// TestRun_OwnLoopSlowToStopWaitedForByNextRun: a durable Run answers, and
// its own loop, stopped as the Run returns, takes longer than
// CancelGrace to stop (its model child ends only at release). The
// session's next Run waits for that loop to stop before it starts a
// fresh one, then answers.
func TestRun_OwnLoopSlowToStopWaitedForByNextRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		release := make(chan struct{})
		stop := sync.OnceFunc(func() { close(release) })
		t.Cleanup(stop)
		spec := model(t, scripted.Turn{Text: "Done."})
		inner := spec.New
		var started atomic.Int64
		spec.New = func() actors.Logic { started.Add(1); return slowEnd{Logic: inner(), release: release} }
		a := newAgent(t, rt, spec, &agent.Options{Name: "own", Store: store, CancelGrace: time.Second})
		if ans, err := a.Run(context.Background(), "s1", ask); err != nil || ans.Text != "Done." {
			t.Fatalf("first Run: %+v, %v", ans, err)
		}
		before := started.Load()
		next := make(chan error, 1)
		var ans *models.Answer
		go func() {
			var err error
			ans, err = a.Run(context.Background(), "s1", ask)
			next <- err
		}()
		synctest.Wait()
		if n := started.Load() - before; n > 0 {
			t.Errorf("the next Run of the session started %d model(s) while the first Run's loop was still stopping", n)
		}
		stop()
		if err := <-next; err != nil || ans.Text != "Done." {
			t.Errorf("the next Run once the old loop stopped: %+v, %v, want the answer %q", ans, err, "Done.")
		}
	})
}

// TestMigrate_WaitsForStoppingLoop: a Run returns while its own loop is
// still stopping (see startStoppingRun), a loop that may still write the
// session under its key. MigrateSessions of that session, which moves
// what is stored under the bare id to that key and must not run beside a
// loop of it (see tools.MoveSession), waits for the loop to stop: one
// whose ctx ends first returns ctx's error, having moved nothing, and
// leaves the loop to be waited for by the next; that one returns nil once
// the loop has stopped.
func TestMigrate_WaitsForStoppingLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startStoppingRun(t, context.Background())
		r.cancel()
		if out := <-r.done; !errors.Is(out.err, context.Canceled) {
			t.Fatalf("the Run cancelled while its old loop stopped: %v, want context.Canceled", out.err)
		}
		migrate := func(ctx context.Context) <-chan error {
			done := make(chan error, 1)
			go func() { done <- r.a.MigrateSessions(ctx, "s1") }()
			return done
		}
		ctx, cancel := context.WithCancel(context.Background())
		first := migrate(ctx)
		notReturned(t, first, "MigrateSessions")
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("MigrateSessions cancelled while the loop stopped: %v, want context.Canceled", err)
		}
		second := migrate(context.Background())
		notReturned(t, second, "a second MigrateSessions")
		r.release()
		if err := <-second; err != nil {
			t.Fatalf("MigrateSessions once the loop stopped: %v", err)
		}
	})
}
