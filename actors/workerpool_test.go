package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
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

		closed := closeWhileBusy(t, p)
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

// closeWhileBusy closes p on a goroutine of its own while a run of it is
// blocked, checks that close waits for it, and returns a channel closed
// as close returns. Call it in a synctest bubble.
func closeWhileBusy(t *testing.T, p *workerPool) <-chan struct{} {
	t.Helper()
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
	return closed
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

// chain is a run that schedules its successor from inside itself, as an
// actor sending to another: handed to the worker it runs on.
type chain struct {
	p    *workerPool
	at   *worker         // the worker in its run
	next *chain          // nil: the last
	body func(w *worker) // run first, given the worker
}

func (c *chain) run() {
	w := c.at
	if c.body != nil {
		c.body(w)
	}
	if c.next != nil {
		c.p.scheduleRun(c.next.run, &c.next.at, w)
	}
}

// TestWorkerPool_HandsRunsFromRunToRun checks that a run scheduled from
// inside a worker's run is taken by that worker after it, rather than
// by another worker woken or started for it.
func TestWorkerPool_HandsRunsFromRunToRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 2, 4)
		const hops = 20
		var ran [hops]*worker
		done := make(chan struct{})
		var first *chain
		for i := hops - 1; i >= 0; i-- {
			first = &chain{p: p, next: first, body: func(w *worker) {
				ran[i] = w
				if i == hops-1 {
					close(done)
				}
			}}
		}
		p.scheduleRun(first.run, &first.at, nil)
		<-done
		if n := p.n.Load(); n != 1 {
			t.Errorf("%d workers for a chain of runs each scheduled by the one before, want 1", n)
		}
		for i, w := range ran {
			if w == nil || w != ran[0] {
				t.Fatalf("run %d on worker %p, run 0 on %p: want every run on the same worker", i, w, ran[0])
			}
		}
		p.close()
	})
}

// TestWorkerPool_HandedRunsStarveNoQueuedRun checks that two runs
// handing each other to their worker forever (two actors ping-ponging)
// do not hold up a run waiting in the queue for more than a few hops.
func TestWorkerPool_HandedRunsStarveNoQueuedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 1)
		const limit = 1000
		var hops atomic.Int64
		var third atomic.Bool
		var ping, pong chain
		body := func(*worker) {
			if hops.Add(1) == limit || third.Load() {
				ping.next, pong.next = nil, nil // the game ends
			}
		}
		ping = chain{p: p, next: &pong, body: body}
		pong = chain{p: p, next: &ping, body: body}
		ranAt := make(chan int64, 1)
		serve := &chain{p: p, next: &ping, body: func(*worker) {
			// Queued: the pool's one worker is in this run, which then
			// hands it ping.
			p.Schedule(func() {
				third.Store(true)
				ranAt <- hops.Load()
			})
		}}
		p.scheduleRun(serve.run, &serve.at, nil)
		if at := <-ranAt; at >= limit || at > handoffBudget+2 {
			t.Errorf("the queued run waited for %d handed runs, want at most %d", at, handoffBudget+2)
		}
		p.close()
	})
}

// TestWorkerPool_BlockedRunHandsItsNextAway checks that a run handed to
// a worker whose run then blocks is taken from it within two ticks (the
// watcher queues it, and a worker takes it), and that the stuck worker
// is handed no more runs.
func TestWorkerPool_BlockedRunHandsItsNextAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 2)
		release := make(chan struct{})
		ran := make(chan *worker, 2)
		handed := &chain{p: p, body: func(w *worker) { ran <- w }}
		var stuck *worker
		blocking := &chain{p: p, body: func(w *worker) {
			stuck = w
			p.scheduleRun(handed.run, &handed.at, w)
			<-release
		}}
		start := time.Now()
		p.scheduleRun(blocking.run, &blocking.at, nil)
		select {
		case w := <-ran:
			if w == stuck {
				t.Errorf("the handed run ran on the blocked worker")
			}
			if waited := time.Since(start); waited > 2*p.tick {
				t.Errorf("the handed run waited %v behind a blocked one, want at most 2 ticks (%v)", waited, 2*p.tick)
			}
		case <-time.After(10 * p.tick):
			t.Fatal("the run handed to a blocked worker did not run")
		}
		// The blocked worker takes no handed run now.
		other := &chain{p: p, body: func(w *worker) { ran <- w }}
		p.scheduleRun(other.run, &other.at, stuck)
		if w := <-ran; w == stuck {
			t.Errorf("a run handed to the blocked worker ran after it")
		}
		close(release)
		p.close()
		if n := p.n.Load(); n != 0 {
			t.Errorf("%d workers left after close", n)
		}
	})
}

// TestWorkerPool_CloseRunsHandedRun checks that close, like queued runs,
// runs a run handed to a busy worker (after that worker's run, before
// close returns), and that a run handed to a worker after close still
// runs.
func TestWorkerPool_CloseRunsHandedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 1, 1)
		gate := make(chan struct{})
		handedRan := make(chan struct{})
		handed := &chain{p: p, body: func(*worker) { close(handedRan) }}
		var busy *worker
		first := &chain{p: p, body: func(w *worker) {
			busy = w
			p.scheduleRun(handed.run, &handed.at, w)
			<-gate
		}}
		p.scheduleRun(first.run, &first.at, nil)
		synctest.Wait() // the worker is in its run, a run handed to it
		closed := closeWhileBusy(t, p)
		select {
		case <-handedRan:
			t.Fatal("the handed run ran before the run it was handed by ended")
		default:
		}
		close(gate)
		<-closed
		select {
		case <-handedRan:
		default:
			t.Error("close returned before the handed run ran")
		}
		after := make(chan struct{})
		late := &chain{p: p, body: func(*worker) { close(after) }}
		p.scheduleRun(late.run, &late.at, busy)
		<-after
	})
}

// hopInvoker hands each user message to hop, with the worker in the
// mailbox's run.
type hopInvoker struct {
	mb  *mailbox
	hop func(msg any, w *worker)
}

func (h *hopInvoker) InvokeSystemMessage(any)       {}
func (h *hopInvoker) InvokeUserMessage(msg any)     { h.hop(msg, h.mb.runner) }
func (h *hopInvoker) EscalateFailure(reason, _ any) { panic(reason) }

// TestMailbox_HopsStayOnTheirWorker checks that a parent and its child
// writing to each other in turn (a frame written into the child, its
// emit back to the parent) run on one worker of the pool, each handed
// to the worker of the run that wrote to it.
func TestMailbox_HopsStayOnTheirWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 2, 4)
		parent, child := newMailbox(), newMailbox()
		child.parent = parent
		childPID := actor.NewPID("test", "parent/child")
		const rounds = 10
		var mu sync.Mutex
		var ran []*worker
		record := func(w *worker) {
			mu.Lock()
			ran = append(ran, w)
			mu.Unlock()
		}
		answers := 0
		done := make(chan struct{})
		parent.RegisterHandlers(&hopInvoker{mb: parent, hop: func(msg any, w *worker) {
			record(w)
			if parent.from != nil {
				if answers++; answers == rounds {
					close(done)
					return
				}
			}
			w = parent.handFrom() // as a Send does
			child.PostUserMessage(msg)
			parent.handDone(w)
		}}, p)
		child.RegisterHandlers(&hopInvoker{mb: child, hop: func(msg any, w *worker) {
			record(w)
			parent.postFromIn(childPID, msg.(*messages.Frame), child)
		}}, p)
		parent.PostUserMessage(messages.Text("s", "ping"))
		<-done
		if n := p.n.Load(); n != 1 {
			t.Errorf("%d workers for a parent and child writing to each other in turn, want 1", n)
		}
		mu.Lock()
		for i, w := range ran {
			if w == nil || w != ran[0] {
				t.Errorf("hop %d on worker %p, hop 0 on %p: want every hop on the same worker", i, w, ran[0])
				break
			}
		}
		mu.Unlock()
		p.close()
	})
}

// TestMailbox_HopFromBacklogGoesToAnotherWorker checks that a run that
// a mailbox's run schedules while messages wait in that mailbox (its
// run goes on) is not handed to its worker but taken by another, so
// that a stream of frames through a chain of actors keeps more than one
// processor busy.
func TestMailbox_HopFromBacklogGoesToAnotherWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newWorkerPool(defaultThroughput, 2, 4)
		parent, child := newMailbox(), newMailbox()
		child.parent = parent
		ran := make(chan *worker, 1)
		var parentOn *worker
		handled := 0
		done := make(chan struct{})
		parent.RegisterHandlers(&hopInvoker{mb: parent, hop: func(msg any, w *worker) {
			if handled++; handled == 1 {
				parentOn = w
				for range 3 { // a backlog
					parent.PostUserMessage(msg)
				}
				w = parent.handFrom() // as a Send does
				child.PostUserMessage(msg)
				parent.handDone(w)
			}
			if handled == 4 {
				close(done)
			}
		}}, p)
		child.RegisterHandlers(&hopInvoker{mb: child, hop: func(_ any, w *worker) { ran <- w }}, p)
		parent.PostUserMessage(messages.Text("s", "ping"))
		if w := <-ran; w == nil || w == parentOn {
			t.Errorf("the child ran on worker %p, the parent with a backlog on %p: want another worker", w, parentOn)
		}
		<-done
		p.close()
	})
}
