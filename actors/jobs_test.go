package actors

import (
	"testing"
	"testing/synctest"
)

// TestJobPool_ReusesParkedGoroutines: jobs one after the other run on the
// one goroutine parked by the first; a burst of concurrent jobs leaves at
// most maxIdleJobGoroutines parked; close ends them all.
func TestJobPool_ReusesParkedGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newJobPool()
		started := 0
		for range 5 {
			done := make(chan struct{})
			p.run(func() { close(done) })
			<-done
			synctest.Wait() // the goroutine is parked again
		}
		if n := p.idle.Load(); n != 1 {
			t.Errorf("%d goroutines parked after jobs one after the other, want 1", n)
		}

		release := make(chan struct{})
		for range maxIdleJobGoroutines + 20 {
			p.run(func() { <-release })
			started++
		}
		synctest.Wait() // every job is blocked on release
		close(release)
		synctest.Wait() // every job is over; its goroutine parked or gone
		if n := p.idle.Load(); n != maxIdleJobGoroutines {
			t.Errorf("%d goroutines parked after a burst of %d jobs, want %d", n, started, maxIdleJobGoroutines)
		}
		p.close(true) // synctest.Test fails if a goroutine of the bubble is left
	})
}

// TestJobPool_CloseLeavesAStuckJob: close without waiting returns while a
// job is still running; that job's goroutine ends once the job does,
// instead of parking.
func TestJobPool_CloseLeavesAStuckJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newJobPool()
		release, ended := make(chan struct{}), make(chan struct{})
		p.run(func() { <-release })
		p.close(false)
		go func() {
			p.wg.Wait()
			close(ended)
		}()
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the stuck job's goroutine ended before its job")
		default:
		}
		close(release)
		<-ended
		var zero *jobPool // a runtime without a pool runs jobs on goroutines of their own
		done := make(chan struct{})
		zero.run(func() { close(done) })
		<-done
		zero.close(true)
	})
}
