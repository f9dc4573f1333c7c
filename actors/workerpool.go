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
	// handoffBudget is the most runs handed from run to run (see
	// workerPool.scheduleRun) a worker takes one after the other while
	// runs wait in the queue.
	handoffBudget = 8
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
// empty a worker parks, and a run scheduled then is handed to it
// directly.
//
// A run scheduled from inside a worker's run (an actor sending to
// another, see scheduleRun) is handed to that worker, like the Go
// scheduler's runnext: the worker takes it as soon as its run ends, on
// the same processor, with the caches the sender warmed, and no parked
// worker is woken for it (a conversation's hops from actor to actor
// otherwise wake the other processor at each hop). A worker holds one
// handed run; another goes to the queue. So that handed runs do not
// starve queued ones, a worker takes at most handoffBudget handed runs
// in a row while runs are queued, then queues the next and takes the
// queue's first.
//
// A run that blocks (a sync tool waiting on I/O, a mailbox with a long
// backlog) must never hold up another: while runs are queued or handed,
// a watcher looks every tick for workers that have been in the same run
// since the previous tick, queues the run handed to each (and hands it
// none after), and starts a worker for each, so that there are as many
// workers taking runs as processors. A full queue falls back to a
// goroutine per run. Workers past max exit instead of parking. Its
// methods are safe for concurrent use.
type workerPool struct {
	throughput int
	target     int // workers wanted taking runs: GOMAXPROCS
	max        int // most workers kept parked
	tick       time.Duration

	work   chan run // queued runs
	quit   chan struct{}
	closed atomic.Bool
	n      atomic.Int32 // workers alive
	idle   atomic.Int32 // workers parked
	wg     sync.WaitGroup

	watching atomic.Bool // a watcher is running

	mu      sync.Mutex
	workers map[*worker]struct{}
}

// run is a mailbox run: fn, and where to note the worker running it
// (nil: nowhere), for runs it schedules to be handed to that worker. The
// worker notes itself as the run starts, and the run reads it on that
// worker's goroutine; a run on a goroutine of its own notes nil.
type run struct {
	fn func()
	at **worker
}

// alone runs r on the calling goroutine, no worker's.
func (r run) alone() {
	if r.at != nil {
		*r.at = nil
	}
	r.fn()
}

// worker is one worker goroutine's state, as the watcher and the runs
// handed to it see it.
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
	p    *workerPool
	// mu guards next and barred. next is the run handed to the worker,
	// taken as its run ends; barred: the watcher took next from the
	// worker, stuck in its run, which is handed no more until it ends.
	mu     sync.Mutex
	next   run
	barred bool
	_      [workerSize - 56]byte
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
	return &workerPool{
		throughput: throughput,
		target:     target,
		max:        maxParked,
		tick:       defaultStuckTick,
		work:       make(chan run, defaultQueue),
		quit:       make(chan struct{}),
		workers:    map[*worker]struct{}{},
	}
}

// Schedule implements actor.Dispatcher.
func (p *workerPool) Schedule(fn func()) { p.schedule(run{fn: fn}) }

// scheduleRun schedules fn, noting in at the worker that runs it as it
// starts. Scheduled by a run about to end, after is the worker noted for
// that run (nil: none): fn is handed to it, unless it holds a handed run
// already or is in a run no more, and otherwise scheduled as by
// Schedule. after is a hint: a run handed to a worker whose run goes on
// after all waits for that run's end, or a tick or two if it blocks,
// and that is all.
func (p *workerPool) scheduleRun(fn func(), at **worker, after *worker) {
	r := run{fn: fn, at: at}
	if after == nil || after.p != p || !after.hand(r) {
		p.schedule(r)
		return
	}
	p.watch() // the worker may block in its run: see watcher
}

// hand gives r to w to take as its run ends, if w is in a run and holds
// no handed run.
func (w *worker) hand(r run) bool {
	w.mu.Lock()
	ok := w.next.fn == nil && !w.barred && w.runs.Load()%2 == 1 && !w.p.closed.Load()
	if ok {
		w.next = r
	}
	w.mu.Unlock()
	return ok
}

// handed takes the run handed to w (fn nil: none) as w's run has ended:
// none can be handed to it until its next run.
func (w *worker) handed() run {
	w.mu.Lock()
	r := w.next
	w.next, w.barred = run{}, false
	w.mu.Unlock()
	return r
}

// schedule queues r, or hands it to a parked worker or a new one.
func (p *workerPool) schedule(r run) {
	if p.closed.Load() {
		go r.alone()
		return
	}
	if p.idle.Load() == 0 && int(p.n.Load()) < p.target && p.start(r) {
		return
	}
	select {
	case p.work <- r: // to a parked worker, or queued
	default: // the queue is full: a goroutine of its own
		go r.alone()
		return
	}
	if len(p.work) > 0 {
		p.watch()
	}
	if p.closed.Load() {
		// close may have drained the queue before r was in it.
		p.drain()
	}
}

// Throughput implements actor.Dispatcher.
func (p *workerPool) Throughput() int { return p.throughput }

// start starts a worker with r as its first run, unless the pool has
// its target of workers already.
func (p *workerPool) start(r run) bool {
	for {
		n := p.n.Load()
		if int(n) >= p.target {
			return false
		}
		if p.n.CompareAndSwap(n, n+1) {
			break
		}
	}
	p.spawn(r)
	return true
}

// spawn starts a worker (counted in n already) with r as its first run;
// once the pool is closed, r gets a goroutine of its own instead.
func (p *workerPool) spawn(r run) {
	w := &worker{p: p}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		p.n.Add(-1)
		go r.alone()
		return
	}
	p.workers[w] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.worker(w, r)
}

func (p *workerPool) worker(w *worker, r run) {
	defer p.wg.Done()
	budget := handoffBudget
	for {
		w.runs.Add(1)
		if r.at != nil {
			*r.at = w
		}
		r.fn()
		w.runs.Add(1)
		if next := w.handed(); next.fn != nil {
			if len(p.work) == 0 {
				budget = handoffBudget // no queued run waits
			}
			if budget > 0 {
				budget--
				r = next
				continue
			}
			// Runs wait in the queue: next goes behind them, and the
			// worker takes the first.
			p.schedule(next)
		}
		budget = handoffBudget
		select {
		case r = <-p.work: // the next queued run, without parking
			continue
		default:
		}
		if int(p.n.Load()) > p.max {
			break // enough parked workers: this one goes
		}
		p.idle.Add(1)
		select {
		case r = <-p.work:
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

// watcher runs while runs are queued or handed: every tick it counts
// the workers that are still in the run they were in at the previous
// tick, queues the runs handed to them, and starts workers until as
// many as target are free of such a run. It returns when no run is
// queued or handed, or the pool closes.
func (p *workerPool) watcher() {
	defer p.wg.Done()
	t := time.NewTimer(p.tick)
	defer t.Stop()
	var taken []run
	for {
		select {
		case <-t.C:
		case <-p.quit:
			return // watching stays set: nothing is watched after close
		}
		if len(p.work) == 0 && !p.anyHanded() {
			p.watching.Store(false)
			// A run queued or handed before the store saw the flag
			// still set.
			if (len(p.work) == 0 && !p.anyHanded()) || !p.watching.CompareAndSwap(false, true) {
				return
			}
		}
		p.mu.Lock()
		stuck := 0
		for w := range p.workers {
			runs := w.runs.Load()
			if runs%2 == 1 && runs == w.seen {
				stuck++
				w.mu.Lock()
				if w.runs.Load() == runs { // still in that run
					if w.next.fn != nil {
						taken = append(taken, w.next)
						w.next = run{}
					}
					w.barred = true
				}
				w.mu.Unlock()
			}
			w.seen = runs
		}
		free := len(p.workers) - stuck
		p.mu.Unlock()
		for i, r := range taken {
			taken[i] = run{}
			p.schedule(r) // to a parked worker, or queued for a new one
		}
		taken = taken[:0]
		for ; free < p.target; free++ {
			select {
			case r := <-p.work: // a new worker, with a queued run
				p.n.Add(1)
				p.spawn(r)
				continue
			default:
			}
			break
		}
		t.Reset(p.tick)
	}
}

// anyHanded reports whether a worker holds a handed run.
func (p *workerPool) anyHanded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.workers {
		w.mu.Lock()
		handed := w.next.fn != nil
		w.mu.Unlock()
		if handed {
			return true
		}
	}
	return false
}

// drain runs what is queued on goroutines of their own.
func (p *workerPool) drain() {
	for {
		select {
		case r := <-p.work:
			go r.alone()
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
