package inspect

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkSnapshotHeld is how long a snapshot holds the inspector's
// lock (held-ns/op), against what the whole snapshot takes (ns/op):
// the state of BenchmarkHooks (the session list full, three tools with
// latencies), none selected, as the event stream of figure 7's row asks.
func BenchmarkSnapshotHeld(b *testing.B) {
	in, o := newObserved(b)
	for i := range 4 * DefaultMaxSessions {
		run := newHookRun(b, "run-"+strconv.Itoa(i))
		run.play(in, o)
	}
	var held time.Duration
	in.building = func() {} // the lock is free once the view is built from the copy
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		c := in.capture("", start)
		held += time.Since(start)
		c.build("")
	}
	b.ReportMetric(float64(held.Nanoseconds())/float64(b.N), "held-ns/op")
}
