package actors

import (
	"sync"
	"sync/atomic"
)

// jobPool runs the goroutines of Context.Go on parked goroutines, as the
// worker pool does for mailbox runs: a job starts on a stack the jobs
// before it have grown, where a fresh goroutine would copy its stack two
// or three times over to decode and validate a tool call's JSON (a fifth
// of an async tool call's CPU time). Up to maxIdleJobGoroutines wait for
// work; more are started when they are all busy. Its methods are safe for
// concurrent use; the zero jobPool runs each job on a goroutine of its own.
type jobPool struct {
	work chan func()
	quit chan struct{}
	idle atomic.Int32
	wg   sync.WaitGroup
}

// maxIdleJobGoroutines bounds the goroutines parked for jobs: a burst of
// concurrent jobs leaves no more than this many behind.
const maxIdleJobGoroutines = 64

func newJobPool() *jobPool {
	return &jobPool{work: make(chan func()), quit: make(chan struct{})}
}

// run runs fn on a parked goroutine, or a new one when none is idle.
func (p *jobPool) run(fn func()) {
	if p == nil || p.work == nil {
		go fn()
		return
	}
	select {
	case p.work <- fn:
		return
	default:
	}
	p.wg.Add(1)
	go p.loop(fn)
}

func (p *jobPool) loop(fn func()) {
	defer p.wg.Done()
	for {
		fn()
		if p.idle.Add(1) > maxIdleJobGoroutines {
			p.idle.Add(-1)
			return
		}
		select {
		case fn = <-p.work:
			p.idle.Add(-1)
		case <-p.quit:
			return
		}
	}
}

// close ends the parked goroutines; with wait, it also waits for the busy
// ones, which end after their job (the caller knows the jobs are over).
func (p *jobPool) close(wait bool) {
	if p == nil || p.quit == nil {
		return
	}
	close(p.quit)
	if wait {
		p.wg.Wait()
	}
}
