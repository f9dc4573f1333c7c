package actors

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"
)

// TestWorkerPool_ReusesParkedWorkers checks that a run scheduled while a
// worker is idle goes to that worker instead of a new goroutine.
func TestWorkerPool_ReusesParkedWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 4, 4)
		for range 3 {
			done := make(chan struct{})
			p.Schedule(func() { close(done) })
			<-done
			synctest.Wait() // the worker is parked again
		}
		if n := p.n.Load(); n != 1 {
			t.Errorf("%d workers for runs one after the other, want 1", n)
		}
		p.close()
	})
}

// TestWorkerPool_BusyWorkersTakeQueuedRuns checks that runs scheduled
// while the pool's workers are busy wait in the queue and are taken by
// those workers, one after the other, without a goroutine each.
func TestWorkerPool_BusyWorkersTakeQueuedRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 4)
		gate := make(chan struct{})
		p.Schedule(func() { <-gate })
		synctest.Wait() // the worker is in its run
		var wg sync.WaitGroup
		var mu sync.Mutex
		var order []int
		for i := range 10 {
			wg.Add(1)
			p.Schedule(func() {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				wg.Done()
			})
		}
		if got := len(p.work); got != 10 {
			t.Errorf("%d runs queued, want 10", got)
		}
		close(gate) // before any tick: the watcher has seen nothing stuck
		wg.Wait()
		if n := p.n.Load(); n != 1 {
			t.Errorf("%d workers, want the 1 that took the queued runs", n)
		}
		for i, v := range order {
			if v != i {
				t.Fatalf("runs taken in order %v, want the order they were scheduled in", order)
			}
		}
		p.close()
	})
}

// TestWorkerPool_BlockedRunHoldsNothingUp checks that a run that blocks
// holds up a run queued behind it for about a tick only (the watcher
// starts a worker), that close waits for the blocked run, and that runs
// scheduled after close still run.
func TestWorkerPool_BlockedRunHoldsNothingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 1)
		release := make(chan struct{})
		p.Schedule(func() { <-release })
		ran := make(chan struct{})
		start := time.Now()
		p.Schedule(func() { close(ran) })
		<-ran
		if waited := time.Since(start); waited > 2*p.tick {
			t.Errorf("the queued run waited %v behind a blocked one, want at most 2 ticks (%v)", waited, 2*p.tick)
		}

		closed := make(chan struct{})
		go func() {
			p.close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("close returned while a run was still going")
		default:
		}
		close(release)
		<-closed
		if n := p.n.Load(); n != 0 {
			t.Errorf("%d workers left after close", n)
		}

		after := make(chan struct{})
		p.Schedule(func() { close(after) })
		<-after
		if p.Throughput() != defaultThroughput {
			t.Errorf("throughput %d", p.Throughput())
		}
	})
}

// TestWorkerPool_StuckWorkersAreReplaced checks that while every worker
// is stuck in a run, queued runs keep being taken: the watcher starts
// enough workers that target of them are free, each time more get stuck.
func TestWorkerPool_StuckWorkersAreReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 2, 64)
		release := make(chan struct{})
		var started sync.WaitGroup
		for range 6 { // each run blocks: every worker that takes one is stuck
			started.Add(1)
			p.Schedule(func() {
				started.Done()
				<-release
			})
		}
		started.Wait() // returns only if the stuck workers were replaced
		if n := p.n.Load(); n != 6 {
			t.Errorf("%d workers for 6 blocked runs, want 6", n)
		}
		close(release)
		p.close()
	})
}

// TestWorkerPool_CloseRunsQueuedRuns checks that runs queued when the
// pool closes are run.
func TestWorkerPool_CloseRunsQueuedRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 1)
		gate := make(chan struct{})
		p.Schedule(func() { <-gate })
		synctest.Wait()
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			p.Schedule(wg.Done)
		}
		go func() {
			synctest.Wait()
			close(gate)
		}()
		p.close()
		wg.Wait()
	})
}

// TestWorkerPool_WorkersShareNoCacheLine checks that the counters the
// pool's workers write on every run lie on cache lines of their own: two
// workers started one after the other must not have their run counters
// within one line pair, nor share it with another object.
func TestWorkerPool_WorkersShareNoCacheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 2, 4)
		gate := make(chan struct{})
		for range 2 {
			p.Schedule(func() { <-gate })
		}
		synctest.Wait() // both workers are in their runs
		p.mu.Lock()
		var addrs []uintptr
		for w := range p.workers {
			addrs = append(addrs, uintptr(unsafe.Pointer(w)))
		}
		p.mu.Unlock()
		close(gate)
		if len(addrs) != 2 {
			t.Fatalf("%d workers, want 2", len(addrs))
		}
		for _, a := range addrs {
			if a%workerSize != 0 || unsafe.Sizeof(worker{}) < workerSize {
				t.Errorf("worker at %#x, %d bytes: shares its %d-byte line pair with other objects", a, unsafe.Sizeof(worker{}), workerSize)
			}
		}
		if d := max(addrs[0], addrs[1]) - min(addrs[0], addrs[1]); d < workerSize {
			t.Errorf("workers %d bytes apart, want at least %d", d, workerSize)
		}
		p.close()
	})
}
