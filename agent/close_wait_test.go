package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// slowEndFlag is slowEnd that records when its end is over.
type slowEndFlag struct {
	slowEnd
	ended *atomic.Bool
}

func (s slowEndFlag) OnFailure(c actors.Context, err error) {
	s.slowEnd.OnFailure(c, err)
	s.ended.Store(true)
}

// heldModel is model(t, turns...) whose every model child ends (stops)
// only once release is called, and sets ended when it has.
func heldModel(t *testing.T, turns ...scripted.Turn) (spec actors.Spec, release func(), ended *atomic.Bool) {
	t.Helper()
	ch := make(chan struct{})
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	spec = model(t, turns...)
	inner := spec.New
	ended = new(atomic.Bool)
	spec.New = func() actors.Logic {
		return slowEndFlag{slowEnd: slowEnd{Logic: inner(), release: ch}, ended: ended}
	}
	return spec, release, ended
}

// closeOf closes a on a goroutine of its own with ctx.
// answeredOnHeldModel returns an agent with default options whose shared
// loop has answered one Run of session s1 and whose model (see
// heldModel) ends only at release.
func answeredOnHeldModel(t *testing.T) (a *agent.Agent, release func(), ended *atomic.Bool) {
	t.Helper()
	spec, release, ended := heldModel(t, scripted.Turn{Text: "Done."})
	a, err := agent.New(actorstest.NewRuntime(t, nil), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ans, err := a.Run(context.Background(), "s1", ask); err != nil || ans.Text != "Done." {
		t.Fatalf("Run: %+v, %v", ans, err)
	}
	return a, release, ended
}

func closeOf(ctx context.Context, a *agent.Agent) <-chan error {
	done := make(chan error, 1)
	go func() { done <- a.Close(ctx) }()
	return done
}

// notReturned fails t if done has a value: every goroutine of the bubble
// is blocked (synctest.Wait), so a Close that has not returned waits.
func notReturned(t *testing.T, done <-chan error, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("%s returned %v while a loop of the agent was still stopping", what, err)
	default:
	}
}

// TestClose_KeepsNameWhileOwnLoopStops: a durable Run answers, and its
// own loop, stopped as the Run returns, takes longer than CancelGrace to
// stop (its model child ends only at release). That loop persists the
// session while it stops, so Close waits for it before it gives the
// agent's name on the Store back: a Close whose ctx ends first fails,
// naming the agent, and keeps the name (a new agent of it is refused
// with ErrNameTaken, and never runs the session beside the old loop); a
// later Close waits until the loop is gone, returns nil and gives the
// name back.
func TestClose_KeepsNameWhileOwnLoopStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		spec, release, ended := heldModel(t, scripted.Turn{Text: "Done."})
		opts := &agent.Options{Name: "own", Store: store, CancelGrace: time.Second}
		a1, err := agent.New(rt, spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		if ans, err := a1.Run(context.Background(), "s1", ask); err != nil || ans.Text != "Done." {
			t.Fatalf("first Run: %+v, %v", ans, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = a1.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"own"`) {
			t.Fatalf("Close whose ctx ends while the session's loop stops: %v, want ctx's error naming the agent", err)
		}
		if ended.Load() {
			t.Fatal("the loop's model ended before release: the test tests nothing")
		}
		if a2, err := agent.New(rt, spec, opts); !errors.Is(err, agent.ErrNameTaken) {
			if err == nil {
				_ = a2.Close(context.Background())
			}
			t.Fatalf("New of the name while the closed agent's loop of s1 still stops: %v, want ErrNameTaken", err)
		}
		second := closeOf(context.Background(), a1)
		notReturned(t, second, "a later Close")
		release()
		if err := <-second; err != nil || !ended.Load() {
			t.Fatalf("later Close: %v (model ended: %v), want nil once the loop is gone", err, ended.Load())
		}
		a2, err := agent.New(rt, spec, opts)
		if err != nil {
			t.Fatalf("New of the name once the agent closed: %v", err)
		}
		if err := a2.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClose_WaitsForOwnLoopLeftByRunItWaitedFor: Close begins while a
// durable Run runs a tool call; Close waits for the Run. The Run is then
// cancelled: its own loop, stopped, takes longer than CancelGrace to stop
// (its model child ends only at release), and the Run returns meanwhile.
// Close, closed already as the Run left, waits for that loop too before
// it returns nil.
func TestClose_WaitsForOwnLoopLeftByRunItWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		spec, release, ended := heldModel(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
			scripted.Turn{Text: "never"},
		)
		started, cancelled := make(chan string, 1), make(chan string, 1)
		a, err := agent.New(rt, spec, &agent.Options{Name: "own", Store: store, CancelGrace: time.Second,
			Tools: []*tools.Tool{blocker(started, cancelled)}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan error, 1)
		go func() { _, err := a.Run(ctx, "s1", ask); ran <- err }()
		<-started
		closed := closeOf(context.Background(), a)
		notReturned(t, closed, "Close during the Run")
		cancel()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Run: %v, want context.Canceled", err)
		}
		<-cancelled
		notReturned(t, closed, "Close once the Run returned")
		if ended.Load() {
			t.Fatal("the loop's model ended before release: the test tests nothing")
		}
		release()
		if err := <-closed; err != nil || !ended.Load() {
			t.Fatalf("Close: %v (model ended: %v), want nil once the loop is gone", err, ended.Load())
		}
	})
}

// TestClose_SecondWaitsForSharedLoop: Close's doc: "A Close whose ctx
// ends first returns its error, and a later Close finishes the work". The
// shared loop is slow to stop (its model child ends only at release). The
// first Close's ctx ends while it waits for the loop: it returns ctx's
// error, naming the agent. A second Close, without deadline, waits for
// the loop to be gone, though the loop was stopping already (Mux.Close
// returns at once on such a loop), and returns nil.
func TestClose_SecondWaitsForSharedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, release, ended := answeredOnHeldModel(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := a.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `agent "agent"`) {
			t.Fatalf("first Close while the loop's model was held: %v, want ctx's error naming the agent", err)
		}
		second := closeOf(context.Background(), a)
		notReturned(t, second, "second Close")
		release()
		if err := <-second; err != nil || !ended.Load() {
			t.Fatalf("second Close: %v (model ended: %v), want nil once the loop is gone", err, ended.Load())
		}
	})
}

// TestClose_WaitsAsLongAsItsCtx: the shared loop takes 20 s to stop (its
// model child ends only then), and Close is given a minute: it waits for
// the loop, beyond any bound of the runtime's own on a stop (protoactor's
// stop future gives up after 10 s), and returns nil once it is gone.
func TestClose_WaitsAsLongAsItsCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, release, ended := answeredOnHeldModel(t)
		time.AfterFunc(20*time.Second, release)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := a.Close(ctx); err != nil || !ended.Load() {
			t.Errorf("Close with a minute's ctx, loop stopping in 20 s: %v after %v (ctx err %v, model ended: %v); want nil once the loop is gone",
				err, time.Since(start), ctx.Err(), ended.Load())
			release()
			_ = a.Close(context.Background())
		}
	})
}
