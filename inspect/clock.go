package inspect

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// coarseResolution is how stale a time of the coarse clock may be: the
// page shows ages to people, for whom 50 ms is nothing, and every tick is
// a wake-up of the process (tens of microseconds of CPU in a VM: at one a
// millisecond, a few percent of a core).
const coarseResolution = 50 * time.Millisecond

// coarseIdle is how long the coarse clock ticks on without being read
// before it stops (the next read starts it again).
const coarseIdle = time.Second

// coarseClock is the clock of the hot path for the times the page shows
// as ages and moments (when a stream opened, a call was made, a session
// changed): reading the system clock costs 100 to 300 ns in a VM, and a
// run of a conversation stamps a dozen frames. It is a time read by a
// goroutine every coarseResolution while something reads it or follows
// its ticks (an event stream, see subscribe), stopped after coarseIdle
// without either: an idle host pays no wake-ups. Tool latencies, which
// want precision, read the system clock (for a sample of the calls, see
// timeCall).
//
// The event streams are paced by its ticks rather than by timers of
// their own: while a timer is pending on a P, every scheduling pass of
// that P reads the system clock (about 1 % of a figure 7 run with two
// timers pending, the clock's and a stream's).
type coarseClock struct {
	ns   atomic.Int64 // unix nanoseconds of the last tick; 0 while stopped
	read atomic.Bool  // read since the last tick

	mu      sync.Mutex
	running bool
	closed  bool
	stop    chan struct{}
	done    chan struct{}
	subs    []chan struct{} // the followers of the ticks (see subscribe)
}

// now returns the time, stale by coarseResolution at most (a little more
// on a loaded machine).
func (c *coarseClock) now() time.Time { return time.Unix(0, c.unixNano()) }

// unixNano is now in unix nanoseconds: what the hot path keeps (no
// pointer to write, unlike a time.Time).
func (c *coarseClock) unixNano() int64 {
	if ns := c.ns.Load(); ns != 0 {
		if !c.read.Load() {
			c.read.Store(true)
		}
		return ns
	}
	return c.start().UnixNano()
}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow is the monotonic clock, for latencies: time.Since of a time
// with a monotonic reading reads that clock alone, half the cost of
// time.Now. It is above zero.
func monoNow() time.Duration { return max(time.Since(monoBase), 1) }

// start reads the system clock and starts the ticking (unless closed).
func (c *coarseClock) start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startLocked()
}

// startLocked is start with c.mu held.
func (c *coarseClock) startLocked() time.Time {
	t := time.Now()
	if c.closed {
		return t
	}
	c.ns.Store(t.UnixNano())
	c.read.Store(true)
	if !c.running {
		c.running = true
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.tick(c.stop, c.done)
	}
	return t
}

// subscribe returns a channel that gets a value at every tick (none when
// the last one was not taken yet), and keeps the clock ticking until
// unsubscribe is called. A closed clock does not tick.
func (c *coarseClock) subscribe() (ticks <-chan struct{}, unsubscribe func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs = append(c.subs, ch)
	c.startLocked()
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		c.subs = slices.DeleteFunc(c.subs, func(s chan struct{}) bool { return s == ch })
		c.mu.Unlock()
	}
}

func (c *coarseClock) tick(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(coarseResolution)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !c.advance(&idle) {
				return
			}
		}
	}
}

// advance handles one tick: it reads the system clock and wakes the
// followers, or reports false when the ticking ends: idle ticks of the
// goroutine without reads or followers came to coarseIdle, or the clock
// was closed (a tick taken from the ticker as close took c.mu: it must
// not store a time close cleared).
func (c *coarseClock) advance(idle *int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.read.Swap(false) || len(c.subs) > 0 {
		*idle = 0
	} else if *idle++; time.Duration(*idle)*coarseResolution >= coarseIdle {
		c.ns.Store(0)
		c.running = false
		return false
	}
	c.ns.Store(time.Now().UnixNano())
	for _, s := range c.subs {
		select {
		case s <- struct{}{}:
		default:
		}
	}
	return true
}

// close stops the ticking for good: later reads read the system clock.
func (c *coarseClock) close() {
	c.mu.Lock()
	c.closed = true
	c.ns.Store(0)
	running, stop, done := c.running, c.stop, c.done
	c.running = false
	c.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
}
