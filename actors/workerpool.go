package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the runtime's worker pool: protoactor's default throughput
// (messages per mailbox run before yielding), the most workers kept
// parked, the room of the queue of runs waiting for a worker, and how
// often a busy pool looks for workers stuck in one run.
const (
	defaultThroughput = 300
	defaultMaxWorkers = 64
	defaultQueue      = 8192
	defaultStuckTick  = time.Millisecond
	// defaultSpinTries is how many times a worker looks for a run before
	// it parks, yielding its processor in between: 30–90 µs, about the
	// time between two hops of a conversation and between its runs.
	defaultSpinTries = 384
)

// workerPool is the runtime's default actor.Dispatcher: mailbox runs are
// queued and taken by a few long-lived worker goroutines, one run after
// the other.
//
// As many workers run as there are processors to run them (GOMAXPROCS):
// when more mailboxes have work than that, the runs wait in the queue and
// a worker that finishes one takes the next without parking, so under
// load a run costs no goroutine switch, no fresh goroutine and no stack
// growth, and the workers' stacks stay grown and warm. When the queue is
// empty a worker first spins a little (one worker at a time, and only
// with more than one processor): it polls for a run, yielding its
// processor between looks, before it parks. A run scheduled meanwhile is
// handed to it (see handoff) instead of to a parked worker, which would
// have to be woken, and its processor with it: the hops of one
// conversation, each scheduled while the run before it ends, then keep
// two workers busy without a wake each. A run scheduled while no worker
// spins is handed to a parked worker directly.
//
// A run that blocks (a sync tool waiting on I/O, a mailbox with a long
// backlog) must never hold up another: while runs are queued, a watcher
// looks every tick for workers that have been in the same run since the
// previous tick and starts a worker for each, so that there are as many
// workers taking runs as processors. A full queue falls back to a
// goroutine per run. Workers past max exit instead of parking. Its
// methods are safe for concurrent use.
type workerPool struct {
	throughput int
	target     int // workers wanted taking runs: GOMAXPROCS
	max        int // most workers kept parked
	tick       time.Duration

	work   chan func() // queued runs
	quit   chan struct{}
	closed atomic.Bool
	n      atomic.Int32 // workers alive
	idle   atomic.Int32 // workers parked
	wg     sync.WaitGroup

	watching atomic.Bool // a watcher is running

	// spinTries is how many times a worker that finds the queue empty
	// looks for a run before it parks (0: it parks at once); spinning
	// counts the workers doing so (at most one), and handoff takes a run
	// scheduled for them: only they read it, never blocking, so a run
	// put there wakes no one.
	spinTries int
	spinning  atomic.Int32
	handoff   chan func()
	// Tests only: called by hand between handing a run and looking
	// whether a worker still spins, and by spin before it stops.
	testHookHanded, testHookSpinEnd func()

	mu      sync.Mutex
	workers map[*worker]struct{}
}

// worker is one worker goroutine's state, as the watcher sees it.
//
// A worker writes runs twice per mailbox run, so each worker has cache
// lines of its own (workerSize bytes, a size class of its own that the
// allocator aligns to it): the 16 bytes alone put the pool's workers,
// allocated one after the other, on one line, which every run on one
// processor then took from the other's cache while both were busy (a
// fleet of sessions at once, not one conversation at a time).
type worker struct {
	// runs is odd while the worker is in a run, and counts them.
	runs atomic.Uint64
	seen uint64 // runs at the watcher's previous look (watcher only)
	_    [workerSize - 16]byte
}

// workerSize is a worker's size: two cache lines, as the processor
// fetches lines in pairs.
const workerSize = 128

// newWorkerPool returns a pool running target workers at least while runs
// are queued (0: GOMAXPROCS) and keeping at most maxParked.
func newWorkerPool(throughput, target, maxParked int) *workerPool {
	if target <= 0 {
		target = runtime.GOMAXPROCS(0)
	}
	spin := defaultSpinTries
	if target == 1 {
		// The run a spinner waits for needs its processor: with one,
		// spinning only delays it.
		spin = 0
	}
	return &workerPool{
		throughput: throughput,
		target:     target,
		max:        maxParked,
		tick:       defaultStuckTick,
		spinTries:  spin,
		handoff:    make(chan func(), 1),
		work:       make(chan func(), defaultQueue),
		quit:       make(chan struct{}),
		workers:    map[*worker]struct{}{},
	}
}

// Schedule implements actor.Dispatcher.
func (p *workerPool) Schedule(fn func()) {
	if p.closed.Load() {
		go fn()
		return
	}
	if p.idle.Load() == 0 && int(p.n.Load()) < p.target && p.start(fn) {
		return
	}
	if p.spinning.Load() > 0 {
		if fn = p.hand(fn); fn == nil {
			return
		}
	}
	select {
	case p.work <- fn: // to a parked worker, or queued
	default: // the queue is full: a goroutine of its own
		go fn()
		return
	}
	if len(p.work) > 0 {
		p.watch()
	}
	if p.closed.Load() {
		// close may have drained the queue before fn was in it.
		p.drain()
	}
}

// hand gives fn to the spinning worker, and returns nil, or returns the
// run to schedule as any other: fn when a run waits for the spinner
// already, or the run it took back (fn or one handed after it) when the
// spinner stopped spinning before it could see it.
func (p *workerPool) hand(fn func()) func() {
	select {
	case p.handoff <- fn:
	default:
		return fn
	}
	if p.testHookHanded != nil {
		p.testHookHanded()
	}
	if p.spinning.Load() > 0 {
		// A spinner that stops now looks at handoff after it stopped
		// counting itself (see spin), so it sees fn.
		return nil
	}
	select {
	case fn = <-p.handoff:
		return fn
	default: // the spinner took it
		return nil
	}
}

// Throughput implements actor.Dispatcher.
func (p *workerPool) Throughput() int { return p.throughput }

// start starts a worker with fn as its first run, unless the pool has
// its target of workers already.
func (p *workerPool) start(fn func()) bool {
	for {
		n := p.n.Load()
		if int(n) >= p.target {
			return false
		}
		if p.n.CompareAndSwap(n, n+1) {
			break
		}
	}
	p.spawn(fn)
	return true
}

// spawn starts a worker (counted in n already) with fn as its first run;
// once the pool is closed, fn gets a goroutine of its own instead.
func (p *workerPool) spawn(fn func()) {
	w := &worker{}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		p.n.Add(-1)
		go fn()
		return
	}
	p.workers[w] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.worker(w, fn)
}

func (p *workerPool) worker(w *worker, fn func()) {
	defer p.wg.Done()
	for {
		w.runs.Add(1)
		fn()
		w.runs.Add(1)
		select {
		case fn = <-p.work: // the next queued run, without parking
			continue
		default:
		}
		if fn = p.spin(); fn != nil {
			continue
		}
		if int(p.n.Load()) > p.max {
			break // enough parked workers: this one goes
		}
		p.idle.Add(1)
		select {
		case fn = <-p.work:
			p.idle.Add(-1)
			continue
		case <-p.quit:
		}
		p.idle.Add(-1)
		break
	}
	p.n.Add(-1)
	p.mu.Lock()
	delete(p.workers, w)
	p.mu.Unlock()
}

// spin looks for a run spinTries times, yielding the processor between
// looks, unless another worker spins already or the pool is closed, and
// returns it (nil: none came).
func (p *workerPool) spin() func() {
	if p.spinTries == 0 || p.spinning.Load() > 0 || !p.spinning.CompareAndSwap(0, 1) {
		return nil
	}
	var fn func()
	for i := 0; i < p.spinTries && fn == nil && !p.closed.Load(); i++ {
		runtime.Gosched()
		select {
		case fn = <-p.handoff:
		case fn = <-p.work:
		default:
		}
	}
	if p.testHookSpinEnd != nil {
		p.testHookSpinEnd()
	}
	p.spinning.Add(-1)
	// A run handed after the last look, or while this worker took
	// another, before Schedule saw it stop (see hand).
	select {
	case late := <-p.handoff:
		if fn == nil {
			return late
		}
		p.Schedule(late) // spinning no more: to a parked worker, or queued
	default:
	}
	return fn
}

// watch starts the watcher unless it is running.
func (p *workerPool) watch() {
	if p.watching.Load() || !p.watching.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		p.watching.Store(false)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.watcher()
}

// watcher runs while runs are queued: every tick it counts the workers
// that are still in the run they were in at the previous tick, and
// starts workers until as many as target are free of such a run. It
// returns when the queue is empty or the pool closes.
func (p *workerPool) watcher() {
	defer p.wg.Done()
	t := time.NewTimer(p.tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.quit:
			return // watching stays set: nothing is watched after close
		}
		if len(p.work) == 0 {
			p.watching.Store(false)
			// A run queued before the store saw the flag still set.
			if len(p.work) == 0 || !p.watching.CompareAndSwap(false, true) {
				return
			}
		}
		p.mu.Lock()
		stuck := 0
		for w := range p.workers {
			runs := w.runs.Load()
			if runs%2 == 1 && runs == w.seen {
				stuck++
			}
			w.seen = runs
		}
		free := len(p.workers) - stuck
		p.mu.Unlock()
		for ; free < p.target; free++ {
			select {
			case fn := <-p.work: // a new worker, with a queued run
				p.n.Add(1)
				p.spawn(fn)
				continue
			default:
			}
			break
		}
		t.Reset(p.tick)
	}
}

// drain runs what is queued, or handed to a spinner, on goroutines of
// their own.
func (p *workerPool) drain() {
	for {
		select {
		case fn := <-p.work:
			go fn()
		case fn := <-p.handoff:
			go fn()
		default:
			return
		}
	}
}

// close stops the idle workers and the watcher, waits for the busy
// workers to finish, and runs what is still queued. Runs scheduled
// afterwards get goroutines of their own.
func (p *workerPool) close() {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return
	}
	p.closed.Store(true)
	p.mu.Unlock()
	close(p.quit)
	p.wg.Wait()
	p.drain()
}
