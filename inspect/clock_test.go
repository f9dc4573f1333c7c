package inspect

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// The coarse clock follows the system clock within its resolution while
// it is read, stops ticking when nobody reads it, starts again on the
// next read, and close stops it for good.
func TestCoarseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c coarseClock
		within := func(what string) {
			t.Helper()
			got, want := c.now(), time.Now()
			if d := want.Sub(got); d < 0 || d > coarseResolution {
				t.Fatalf("%s: coarse time %v is %v behind the clock, want [0, %v]", what, got, d, coarseResolution)
			}
		}
		within("first read")
		for i := range 50 { // read while time passes: it ticks along
			time.Sleep(coarseResolution/3 + time.Duration(i)*time.Microsecond)
			within("while read")
		}
		time.Sleep(2 * coarseIdle) // nobody reads: it stops
		synctest.Wait()
		if c.ns.Load() != 0 || c.running {
			t.Fatalf("still ticking after %v without reads", 2*coarseIdle)
		}
		within("read again") // starts again
		if !c.running {
			t.Fatal("not ticking after a read")
		}
		c.close()
		if c.running || c.ns.Load() != 0 {
			t.Fatal("ticking after close")
		}
		time.Sleep(coarseResolution)
		within("after close") // the system clock itself
		if c.running {
			t.Fatal("a read after close started the ticking")
		}
	})
}

// A tool's calls are all timed unless more than timedPerTick of them are
// dispatched in one tick of the coarse clock.
func TestTimeCall(t *testing.T) {
	var st toolStats
	tick := int64(coarseResolution)
	for i := range timedPerTick {
		if !st.timeCall(tick) {
			t.Fatalf("call %d of the tick not timed", i+1)
		}
	}
	if st.timeCall(tick) {
		t.Fatalf("call %d of the tick timed, want %d at most", timedPerTick+1, timedPerTick)
	}
	if !st.timeCall(tick + int64(coarseResolution)) {
		t.Fatal("the first call of the next tick not timed")
	}
}

// A follower of the ticks gets one every coarseResolution and keeps the
// clock ticking without reads; once it unsubscribes, the clock stops
// after coarseIdle.
func TestCoarseClock_Subscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c coarseClock
		defer c.close()
		ticks, unsubscribe := c.subscribe()
		start := time.Now()
		for i := range 2 * int(coarseIdle/coarseResolution) {
			<-ticks
			if got, want := time.Since(start), time.Duration(i+1)*coarseResolution; got != want {
				t.Fatalf("tick %d at %v, want %v", i+1, got, want)
			}
		}
		if !c.running {
			t.Fatal("not ticking while followed")
		}
		unsubscribe()
		time.Sleep(2 * coarseIdle)
		synctest.Wait()
		if c.running || c.ns.Load() != 0 {
			t.Fatalf("still ticking %v after the follower left", 2*coarseIdle)
		}
		select {
		case <-ticks:
			t.Fatal("a tick after unsubscribing")
		default:
		}
	})
}

// TestTicksLater: an interval is rounded up to whole ticks of the coarse
// clock, less half a tick, at least one tick; one too long to count in
// ticks (up to the largest Duration) is never, not one tick, as the sum
// that rounded it up once overflowed to.
func TestTicksLater(t *testing.T) {
	half := coarseResolution / 2
	for _, c := range []struct {
		d, want time.Duration
	}{
		{0, coarseResolution - half},
		{time.Nanosecond, coarseResolution - half},
		{coarseResolution, coarseResolution - half},
		{coarseResolution + 1, 2*coarseResolution - half},
		{250 * time.Millisecond, 250*time.Millisecond - half},
		{time.Second, time.Second - half},
		{math.MaxInt64 / coarseResolution * coarseResolution, math.MaxInt64/coarseResolution*coarseResolution - half},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := ticksLater(c.d); got != c.want {
			t.Errorf("ticksLater(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

// TestCoarseClock_TickAfterClose: a tick the ticking goroutine took from
// its ticker just as close took the lock is handled after close: it
// stores no time (reads after close read the system clock, not a time
// frozen at that tick) and ends the ticking.
func TestCoarseClock_TickAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c coarseClock
		c.now() // ticking
		c.close()
		idle := 0
		if c.advance(&idle) {
			t.Error("a tick handled after close goes on ticking")
		}
		if ns := c.ns.Load(); ns != 0 {
			t.Fatalf("a tick handled after close stored %v: reads after close return it for good", time.Unix(0, ns))
		}
	})
}
