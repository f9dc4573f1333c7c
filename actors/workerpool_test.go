package actors

import (
	"testing"
	"testing/synctest"
)

// TestWorkerPool_ReusesParkedWorkers checks that a run scheduled while a
// worker is idle goes to that worker instead of a new goroutine.
func TestWorkerPool_ReusesParkedWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 4)
		for range 3 {
			done := make(chan struct{})
			p.Schedule(func() { close(done) })
			<-done
			synctest.Wait() // the worker is parked again
		}
		p.mu.Lock()
		n := p.n
		p.mu.Unlock()
		if n != 1 {
			t.Errorf("%d workers for runs one after the other, want 1", n)
		}
		p.close()
	})
}

// TestWorkerPool_BlockedRunHoldsNothingUp checks that a run that blocks
// does not delay another even when the pool is at its maximum, that close
// waits for the blocked run, and that runs scheduled after close still run.
func TestWorkerPool_BlockedRunHoldsNothingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1)
		release := make(chan struct{})
		p.Schedule(func() { <-release })
		ran := make(chan struct{})
		p.Schedule(func() { close(ran) })
		<-ran

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

		after := make(chan struct{})
		p.Schedule(func() { close(after) })
		<-after
		if p.Throughput() != defaultThroughput {
			t.Errorf("throughput %d", p.Throughput())
		}
	})
}
