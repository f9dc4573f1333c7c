package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// yieldUntil yields until cond holds: the pool's spinning worker is never
// durably blocked, so synctest cannot wait for it.
func yieldUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 1e7 {
			t.Fatalf("gave up waiting until %s", what)
		}
		runtime.Gosched()
	}
}

// TestWorkerPool_SpinningWorkerTakesRunWithoutWakingParked checks that a
// worker that found no run waiting polls for one before it parks, and
// that a run scheduled meanwhile goes to it, not to a parked worker,
// which would have to be woken: one conversation's hops, scheduled one
// after the other, then keep two workers busy without a wake each.
func TestWorkerPool_SpinningWorkerTakesRunWithoutWakingParked(t *testing.T) {
	t.Cleanup(func() { leakcheck.VerifyNone(t, goleak.IgnoreCurrent()) })
	p := newWorkerPool(defaultThroughput, 2, 4)
	p.spinTries = 1 << 40 // spins until it gets a run, or the pool closes
	first, second := make(chan struct{}), make(chan struct{})
	p.Schedule(func() { <-first })
	p.Schedule(func() { <-second })
	yieldUntil(t, "both runs are in a worker", func() bool { return p.n.Load() == 2 })
	close(second) // its worker finds no run: it spins
	yieldUntil(t, "a worker spins", func() bool { return p.spinning.Load() == 1 })
	close(first) // the other spinner-to-be parks: one spins already
	yieldUntil(t, "a worker is parked", func() bool { return p.idle.Load() == 1 })

	runsOf := func() map[*worker]uint64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		runs := map[*worker]uint64{}
		for w := range p.workers {
			runs[w] = w.runs.Load()
		}
		return runs
	}
	before := runsOf()
	for range 3 {
		done := make(chan struct{})
		p.Schedule(func() { close(done) })
		<-done
		yieldUntil(t, "the worker spins again", func() bool { return p.spinning.Load() == 1 })
	}
	after := runsOf()
	moved := 0
	for w, n := range after {
		if n != before[w] {
			moved++
			if n-before[w] != 6 {
				t.Errorf("a worker went through %d run marks for the 3 runs, want 6", n-before[w])
			}
		}
	}
	if moved != 1 || p.idle.Load() != 1 {
		t.Errorf("%d workers took the 3 runs and %d is parked, want the spinning one to take them all and the parked one left parked", moved, p.idle.Load())
	}
	p.close() // stops the spinner
	if n := p.n.Load(); n != 0 {
		t.Errorf("%d workers left after close", n)
	}
}

// TestWorkerPool_RunHandedAsSpinnerStopsIsRun checks the two orders in
// which a run is handed to a spinner as it stops: handed before it
// stopped counting itself, the spinner finds it after; handed after, the
// scheduler sees no spinner and takes it back. Either way the run runs.
func TestWorkerPool_RunHandedAsSpinnerStopsIsRun(t *testing.T) {
	t.Cleanup(func() { leakcheck.VerifyNone(t, goleak.IgnoreCurrent()) })
	t.Run("handed before the spinner stops", func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 4) // the worker spinning is the one wanted: a run goes to it
		p.spinTries = 1
		var late atomic.Bool
		done := make(chan struct{})
		p.testHookSpinEnd = func() {
			// Past the spinner's last look, before it stops counting
			// itself: the run is handed to it.
			if late.CompareAndSwap(false, true) {
				p.Schedule(func() { close(done) })
			}
		}
		p.Schedule(func() {})
		yieldUntil(t, "the run handed as the spinner stopped ran", func() bool { return isClosed(done) })
		p.close()
	})
	t.Run("handed after the spinner stopped", func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 4)
		gate := make(chan struct{})
		p.Schedule(func() { <-gate }) // the one worker wanted, busy
		p.spinning.Store(1)           // and a spinner that stops without another look
		p.testHookHanded = func() { p.spinning.Store(0) }
		done := make(chan struct{})
		p.Schedule(func() { close(done) })
		close(gate)
		yieldUntil(t, "the run handed as the spinner stopped ran", func() bool { return isClosed(done) })
		p.close()
	})
}

// TestWorkerPool_SpinnerStoppingLosesNoRun checks that runs scheduled
// while workers start and stop spinning are all run, exactly once.
func TestWorkerPool_SpinnerStoppingLosesNoRun(t *testing.T) {
	t.Cleanup(func() { leakcheck.VerifyNone(t, goleak.IgnoreCurrent()) })
	p := newWorkerPool(defaultThroughput, 2, 4)
	p.spinTries = 1 // stops at once: spinners start and stop all the time
	const senders, each = 4, 5000
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range each {
				done := make(chan struct{})
				p.Schedule(func() {
					ran.Add(1)
					close(done)
				})
				<-done // one at a time: the workers go idle in between
			}
		})
	}
	wg.Wait()
	p.close()
	if got := ran.Load(); got != senders*each {
		t.Errorf("%d runs ran, want %d", got, senders*each)
	}
}

// TestWorkerPool_OneProcessorDoesNotSpin checks that a pool of one
// worker wanted (GOMAXPROCS 1) never spins: nothing else could run the
// run it waits for while it holds the only processor.
func TestWorkerPool_OneProcessorDoesNotSpin(t *testing.T) {
	if p := newWorkerPool(defaultThroughput, 1, 4); p.spinTries != 0 {
		t.Errorf("a pool of 1 worker spins %d times before parking, want 0", p.spinTries)
	}
	if p := newWorkerPool(defaultThroughput, 2, 4); p.spinTries == 0 {
		t.Error("a pool of 2 workers does not spin")
	}
}
