package boltstore

import (
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// BenchmarkGetEvents_CheckCost is what checking the events of a read
// costs, with as little else in the measurement as the machine allows:
// b.N pairs of reads of openReadFixture's 10 000 events, one with the
// checks and one without (which first drawn at random), on one locked OS
// thread, each timed by that thread's CPU clock (time the thread waits
// for a core is not counted), with the collector off during the reads
// (the heap is collected before every fourth pair), after a pair not
// counted. It reports each
// side's CPU per event (the lower quartile of its reads) and on/off, the
// geometric mean of the middle half of the pairs' ratios. On a shared
// machine, run it alone on one CPU for the steadiest figures:
//
//	GOMAXPROCS=1 taskset -c 1 go test -run '^$' -bench CheckCost -benchtime 600x ./durability/boltstore
func BenchmarkGetEvents_CheckCost(b *testing.B) {
	s := openReadFixture(b) // written with checksums: read both ways
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	read := func(on bool) time.Duration {
		benchhook.ChecksumsOff.Store(!on)
		defer benchhook.ChecksumsOff.Store(false)
		start := threadCPU(b)
		readFixture(b, s)
		return threadCPU(b) - start
	}
	read(true) // the first reads fault the file's pages in
	read(false)
	var on, off []time.Duration
	var ratios []float64
	for i := range b.N {
		if i%4 == 0 {
			runtime.GC()
		}
		var t [2]time.Duration // with checks, without
		first := rand.IntN(2)
		t[first] = read(first == 0)
		t[1-first] = read(first != 0)
		on, off = append(on, t[0]), append(off, t[1])
		ratios = append(ratios, float64(t[0])/float64(t[1]))
	}
	perEvent := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/4].Nanoseconds()) / fixtureEvents
	}
	b.ReportMetric(perEvent(on), "on-ns/event")
	b.ReportMetric(perEvent(off), "off-ns/event")
	b.ReportMetric(middleMean(ratios), "on/off")
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// middleMean returns the geometric mean of the middle half of ratios (all
// of them below 4).
func middleMean(ratios []float64) float64 {
	s := slices.Clone(ratios)
	slices.Sort(s)
	if q := len(s) / 4; q > 0 {
		s = s[q : len(s)-q]
	}
	sum := 0.0
	for _, r := range s {
		sum += math.Log(r)
	}
	return math.Exp(sum / float64(len(s)))
}
