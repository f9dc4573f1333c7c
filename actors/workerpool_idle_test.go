package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// echoSpec is a duplex that answers every frame with itself.
func echoSpec() Spec {
	return Duplex("echo", func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
}

// poolRuns returns the run marks of p's workers (see worker.runs).
func poolRuns(p *workerPool) map[*worker]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := make(map[*worker]uint64, len(p.workers))
	for w := range p.workers {
		runs[w] = w.runs.Load()
	}
	return runs
}

// TestRuntime_IdlePoolSpinsOnceThenRestsForGood checks that a runtime
// left idle after some work costs nothing once its worker's spin is
// over: every worker of its pool parks, no watcher stays, and nothing
// wakes them later (a timer of the pool or of the runtime would, as the
// bubble's clock moves on by an hour): no worker takes a run, and none
// spins again.
func TestRuntime_IdlePoolSpinsOnceThenRestsForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two workers wanted, so that one spins whatever GOMAXPROCS is.
		p := newWorkerPool(defaultThroughput, 2, defaultMaxWorkers)
		var spins atomic.Int64
		p.testHookSpinEnd = func() { spins.Add(1) }
		rt, err := NewRuntime(&RuntimeOptions{Dispatcher: p})
		if err != nil {
			t.Fatal(err)
		}
		rt.pool = p // the runtime's own, closed by its Close
		defer func() {
			if err := rt.Close(context.Background()); err != nil {
				t.Errorf("close runtime: %v", err)
			}
		}()
		conn, err := rt.Start(echoSpec())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for range 50 {
			if err := conn.Send(messages.Text("s", "hop")); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Recv(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// The last run's worker spins, then parks: yielding, it is
		// never durably blocked, so synctest cannot wait for it.
		rested := func() bool { return p.spinning.Load() == 0 && p.idle.Load() == p.n.Load() && !p.watching.Load() }
		yieldUntil(t, "every worker parks, none spinning, no watcher", rested)
		synctest.Wait() // and nothing else of the runtime runs
		if spins.Load() == 0 {
			t.Error("no worker spun before parking")
		}
		runs, spun := poolRuns(p), spins.Load()

		time.Sleep(time.Hour) // the bubble's clock: timers fire at once
		synctest.Wait()
		if !rested() {
			t.Errorf("an hour idle: %d workers spinning, %d of %d parked, watcher running %v; want all parked",
				p.spinning.Load(), p.idle.Load(), p.n.Load(), p.watching.Load())
		}
		if n := spins.Load() - spun; n != 0 {
			t.Errorf("the workers of the idle runtime spun %d times in an hour, want none", n)
		}
		for w, n := range poolRuns(p) {
			if n != runs[w] {
				t.Errorf("a worker of the idle runtime took %d runs in an hour, want none", (n-runs[w])/2)
			}
		}
	})
}

// TestRuntime_CloseDoesNotWaitForSpin checks that closing a runtime
// whose pool has a worker spinning, one that would spin for ever, returns:
// the spinner takes the runs that stop the duplexes, and stops spinning
// when the pool closes, at its next look.
func TestRuntime_CloseDoesNotWaitForSpin(t *testing.T) {
	t.Cleanup(func() { leakcheck.VerifyNone(t, goleak.IgnoreCurrent()) })
	p := newWorkerPool(defaultThroughput, 2, defaultMaxWorkers)
	p.spinTries = 1 << 40 // until a run comes, or the pool closes
	rt, err := NewRuntime(&RuntimeOptions{Dispatcher: p})
	if err != nil {
		t.Fatal(err)
	}
	rt.pool = p // the runtime's own, closed by its Close
	conn, err := rt.Start(echoSpec())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if err := conn.Send(messages.Text("s", "hop")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	yieldUntil(t, "a worker spins", func() bool { return p.spinning.Load() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- rt.Close(ctx) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close runtime: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the runtime's Close waits for its pool's spinning worker")
	}
	if n := p.n.Load(); n != 0 {
		t.Errorf("%d workers left after the runtime closed", n)
	}
}
