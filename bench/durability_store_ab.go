package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// Checksums on against off, measured in one run: the two sides alternate
// at fine grain (a slice of work each, in pairs, which side of a pair goes
// first drawn at random), so that a change in the machine's load or the
// disk's speed during a round falls on both sides alike instead of on
// whichever side ran then. Each row measures one such run per round; its
// baseline's figure is the off side of that same run.
//
// The checksum rows take a round's ratio as the geometric mean of the
// middle half of the ratios of its pairs (see [pairRatio]) rather than as
// the ratio of the sides' sums over the round: a pair hit by a
// neighbour's burst of work counts as one of many instead of by its share
// of the sum. Every slice of
// these rows starts from a collected heap ([pairRun].gc), so that the
// garbage collector, which runs when the heap has grown by so much, runs
// at the same points of both sides' work instead of wherever the last
// cycle left it (in A/A runs of the persist row without fsync, the
// spread of the pairs' ratios halved), and a run's first pairs, where a
// fresh store makes its buckets and grows its file, are not counted.
// Figure 4's A/A rows (the same side twice) show the spread of the method
// itself.

// abTotals is what an interleaved run measured of each side: [0] with
// checksums on, [1] with them off (or on, in an A/A run); and the ratios
// of its pairs.
type abTotals struct {
	items  [2]int           // operations completed (events, reads)
	wall   [2]time.Duration // wall time spent in the side's slices
	cpu    [2]time.Duration // the process's CPU time during them
	allocs [2]uint64        // heap allocations during them
	// wallRatios and cpuRatios are, for each pair measured, side 0's time
	// per item over side 1's, in wall and in CPU time.
	wallRatios, cpuRatios []float64
	// bytes are the bytes each side allocated in its slices, and
	// gcWall and gcCPU the collector's cost charged to it (included in
	// wall and cpu), with [pairRun].chargeGC; collections is how many
	// collections the run's counted pairs paid for, collectedWall and
	// collectedCPU what they cost (what gcWall and gcCPU split).
	bytes                       [2]uint64
	gcWall, gcCPU               [2]time.Duration
	collections                 int
	collectedWall, collectedCPU time.Duration
	// periods are, for each collection of the run, the live heap it
	// left and the bytes allowed before the next.
	periods []chargePeriod
}

// chargePeriod is one collection of a charged run: the live heap it
// left and the period set for the next.
type chargePeriod struct{ live, period uint64 }

// abSlice runs one slice of work of side 0 or 1 with checksums on or off
// (the switch is already set) and returns how many operations it
// completed.
type abSlice func(side int, on bool) (int, error)

// abFixture is what an interleaved checksums run works on.
type abFixture struct {
	slice abSlice
	// after, if set, runs after each slice of side, outside its
	// measurement and with checksums still as the slice had them: it
	// undoes what the slice set up that is not the work measured (a
	// router recovered by the slice is stopped again).
	after func(side int) error
	// done, if set, runs once the run is over.
	done func()
}

// abSetup makes the fixture of an interleaved checksums run whose sides
// have checksums on or off as checks says: a store that a side writes is
// its own, written only with that side's setting (data written with
// checksums off fails the checks once they are on again).
type abSetup func(b *testing.B, checks [2]bool) abFixture

// withChecks runs fn with checksums on or off, then puts them back on.
func withChecks(on bool, fn func() error) error {
	benchhook.ChecksumsOff.Store(!on)
	defer benchhook.ChecksumsOff.Store(false)
	return fn()
}

// checksumsAB is an A/B run: side 0 with checksums, side 1 without.
var checksumsAB = [2]bool{true, false}

// checksumsAA is an A/A run, both sides with checksums: the spread of its
// ratios is the method's own.
var checksumsAA = [2]bool{true, true}

// The names of the sides of checksumsAB and checksumsAA rows.
var (
	onOffNames = [2]string{"checksums on", "checksums off"}
	onOnNames  = [2]string{"checksums on", "checksums on, again"}
)

// byPairsNote ends the note of a checksums row: how it takes a round's
// ratio.
const byPairsNote = "; a round's ratio is the geometric mean of the middle half of its pairs' ratios, whose order is balanced two pairs at a time (each slice starts from a collected heap, the first pairs are not counted), the baseline's figure its side's time summed over its slices, ours that times the ratio"

// runAB runs pairs of slices of fx, one of each side with checksums on or
// off as checks says, each pair in random order, and returns the totals
// (see [pairRun.run]).
func runAB(b *testing.B, fx abFixture, checks [2]bool, r pairRun) abTotals {
	b.Helper()
	defer benchhook.ChecksumsOff.Store(false)
	side := func(i int) func() (int, error) {
		return func() (int, error) {
			benchhook.ChecksumsOff.Store(!checks[i])
			return fx.slice(i, checks[i])
		}
	}
	r.after = fx.after
	return r.run(b, [2]func() (int, error){side(0), side(1)})
}

// runPairs runs pairs of slices, one of each side, and returns the
// totals: b.N pairs, or if until is positive as many as fit in until (at
// least one). See [pairRun.run].
func runPairs(b *testing.B, slices [2]func() (int, error), until time.Duration) abTotals {
	b.Helper()
	return pairRun{until: until}.run(b, slices)
}

// pairRun says how an interleaved run goes.
type pairRun struct {
	// until is how long the run lasts (0: b.N pairs).
	until time.Duration
	// warmup is how many pairs a timed run makes before those it counts:
	// the first slices of a fresh store pay for its first pages, its
	// first checkpoint's bookkeeping, the code's first use.
	warmup int
	// gc collects the heap before every slice (outside its measurement,
	// the same for both sides): a slice then starts with no garbage of
	// the other side's and no cycle under way, and its allocations bring
	// on the collector at the same points for both sides.
	gc bool
	// after, if set, runs after each slice of side, outside its
	// measurement, before the collection.
	after func(side int) error
	// chargeGC (not with gc) keeps the collector out of the slices and
	// charges its whole cost to the sides by the bytes they allocate:
	// automatic collection is off for the run, and the heap is
	// collected between slices as often as the runtime would collect
	// it (whenever the bytes allocated since the last collection reach
	// what the runtime allows after it: its heap goal over the live
	// heap, read again after every collection, so that the period
	// follows the live heap as the runtime's would), each collection
	// timed (wall and the process's CPU time); a memory limit bounds
	// the heap meanwhile, and a run in which the runtime had to collect
	// by itself (a slice allocated several periods) fails. Every slice
	// is then charged the run's collection cost per
	// byte times the bytes allocated in it, in its totals and in the
	// ratio of its pair. A collection that falls inside one slice can
	// cost as much as the slice's own work, so without this a pair's
	// ratio depends on which side the runtime happened to collect in;
	// with gc, a slice that allocates less than a cycle's worth would
	// carry no collection at all. What is charged is the collections'
	// own work, done with the world stopped; what a cycle running
	// concurrently costs the code beside it (write barriers, assists, a
	// core taken by its worker) is not. The cost per byte is one for
	// both sides: a side whose live heap makes each collection costlier
	// shares that with the other by bytes (the runtime's pacer makes the
	// period grow with the live heap, so the cost per byte moves far
	// less than the cost per collection), and bytes that a side's
	// goroutines allocate after its slice has ended count to the slice
	// then running.
	chargeGC bool
}

// gcCharge is the collector's cost over an interleaved run, kept apart
// from the slices (see [pairRun].chargeGC).
type gcCharge struct {
	period      uint64 // bytes allocated between two collections
	since       uint64 // bytes allocated when the last collection ran
	collections int
	wall, cpu   time.Duration // spent in the collections counted
	periods     []chargePeriod
	percent     int    // GOGC before the run
	limit       int64  // the memory limit before the run
	automatic   uint64 // automatic collections before the run
}

// run runs pairs of slices, one of each side, and returns the totals:
// b.N pairs, or if r.until is positive as many as fit in it after
// r.warmup uncounted ones (at least one counted). Which side of a pair
// goes first is drawn at random, not alternated: work that comes back
// every few slices (a store's checkpoint every few pairs, a collection
// every so many) would otherwise fall at the same place in the order
// every time, and an order kept for a whole run can favour one side by
// several per cent where both sides do the same work (an A/A run, both
// with checksums). Allocations are counted with runtime/metrics, which
// does not stop the world (without r.gc the count lags by what the Ps'
// caches hold, a few dozen objects, far below a slice's).
func (r pairRun) run(b *testing.B, slices [2]func() (int, error)) abTotals {
	b.Helper()
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	type slice struct {
		items         int
		wall, cpu     time.Duration
		allocs, bytes uint64
	}
	// With gc, the collection that ends a slice is the one the next
	// starts from (the first comes before the run): it also flushes the
	// Ps' caches, so that the slice's allocations are all counted.
	readAllocs := func() (objects, bytes uint64) {
		metrics.Read(allocs)
		return allocs[0].Value.Uint64(), allocs[1].Value.Uint64()
	}
	if r.gc {
		runtime.GC()
	}
	var charge *gcCharge
	if r.chargeGC && !r.gc {
		charge = startCharging()
		defer charge.stop()
	}
	last, lastBytes := readAllocs()
	measure := func(side int) slice {
		cpu, start := processCPU(), time.Now()
		n, err := slices[side]()
		wall, used := time.Since(start), processCPU()-cpu
		if err != nil {
			b.Fatal(err)
		}
		if r.after != nil {
			if err := r.after(side); err != nil {
				b.Fatal(err)
			}
		}
		if r.gc {
			runtime.GC()
		}
		now, nowBytes := readAllocs()
		s := slice{items: n, wall: wall, cpu: used, allocs: now - last, bytes: nowBytes - lastBytes}
		if charge != nil {
			charge.collectIfDue(nowBytes)
			now, nowBytes = readAllocs()
		}
		last, lastBytes = now, nowBytes
		return s
	}
	warmup := 0
	if r.until > 0 {
		warmup = r.warmup
	}
	for range warmup {
		measure(0)
		measure(1)
	}
	if charge != nil {
		charge.reset() // the warm-up's collections are not counted
	}
	b.ResetTimer()
	var pairs [][2]slice
	start := time.Now()
	flip := 0
	for i := 0; ; i++ {
		// The order of each two pairs is drawn at random, one of them
		// each way round, so that a round's pairs are balanced: whatever
		// the second of two turns gains (pages the first made warm) falls
		// on both sides.
		if i%2 == 0 {
			flip = rand.IntN(2)
		}
		var m [2]slice
		first := (i + flip) % 2
		m[first] = measure(first)
		m[1-first] = measure(1 - first)
		pairs = append(pairs, m)
		if r.until > 0 && time.Since(start) >= r.until || r.until <= 0 && i+1 >= b.N {
			break
		}
	}
	// The collector's cost per byte allocated in the counted slices,
	// charged to each slice by its bytes.
	var wallPerByte, cpuPerByte float64
	var t abTotals
	if charge != nil {
		var allocated uint64
		for _, m := range pairs {
			allocated += m[0].bytes + m[1].bytes
		}
		charge.finish()
		if n := charge.automaticSince(); n > 0 {
			b.Fatalf("the runtime collected %d times by itself during the run: a slice allocated beyond the memory limit set to bound the heap (%d MiB), so the collector's cost fell inside slices and its charge by bytes is wrong", n, debug.SetMemoryLimit(-1)>>20)
		}
		if allocated > 0 {
			wallPerByte = float64(charge.wall) / float64(allocated)
			cpuPerByte = float64(charge.cpu) / float64(allocated)
		}
		t.collections, t.collectedWall, t.collectedCPU = charge.collections, charge.wall, charge.cpu
		t.periods = charge.periods
	}
	for _, m := range pairs {
		for side := range m {
			s := &m[side]
			gcWall := time.Duration(wallPerByte * float64(s.bytes))
			gcCPU := time.Duration(cpuPerByte * float64(s.bytes))
			s.wall += gcWall
			s.cpu += gcCPU
			t.items[side] += s.items
			t.wall[side] += s.wall
			t.cpu[side] += s.cpu
			t.allocs[side] += s.allocs
			t.bytes[side] += s.bytes
			t.gcWall[side] += gcWall
			t.gcCPU[side] += gcCPU
		}
		if m[0].items > 0 && m[1].items > 0 {
			per := func(a, b time.Duration) float64 {
				return float64(a) / float64(m[0].items) / (float64(b) / float64(m[1].items))
			}
			t.wallRatios = append(t.wallRatios, per(m[0].wall, m[1].wall))
			if m[0].cpu > 0 && m[1].cpu > 0 {
				t.cpuRatios = append(t.cpuRatios, per(m[0].cpu, m[1].cpu))
			}
		}
	}
	return t
}

// startCharging collects the heap, turns automatic collection off until
// stop and sets the period before the next collection (see rearm).
func startCharging() *gcCharge {
	runtime.GC()
	c := &gcCharge{percent: debug.SetGCPercent(-1), limit: debug.SetMemoryLimit(-1)}
	c.rearm()
	m := []metrics.Sample{{Name: "/gc/cycles/automatic:gc-cycles"}}
	metrics.Read(m)
	c.automatic = m[0].Value.Uint64()
	return c
}

// minChargePeriod bounds the period between collections from below, for
// a goal read wrong: the runtime's smallest heap goal is 4 MiB.
const minChargePeriod = 1 << 20

// backstopSlack is how far beyond four periods the memory in use may
// grow during a charged run before the runtime collects by itself (see
// rearm).
const backstopSlack = 64 << 20

// rearm, just after a collection, sets the period before the next as
// the runtime's pacer would: its heap goal over the live heap, read with
// GOGC and the memory limit as they were before the run (a GOGC of off
// is taken as 100), so that the period follows the live heap as it
// grows or shrinks over the run. It also sets a memory limit of the
// memory in use plus four periods and backstopSlack (or the limit
// before the run, if lower), so that a slice that allocates far more
// than a period cannot grow the heap without bound while automatic
// collection is off: the runtime then collects inside the slice, and
// the run fails (see [pairRun].run).
func (c *gcCharge) rearm() {
	percent := c.percent
	if percent < 0 {
		percent = 100
	}
	debug.SetMemoryLimit(c.limit)
	debug.SetGCPercent(percent)
	m := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(m)
	debug.SetGCPercent(-1)
	goal, live := m[0].Value.Uint64(), m[1].Value.Uint64()
	c.period = max(goal-min(goal, live), minChargePeriod)
	c.since = m[2].Value.Uint64()
	c.periods = append(c.periods, chargePeriod{live: live, period: c.period})
	inUse := m[3].Value.Uint64() - m[4].Value.Uint64()
	debug.SetMemoryLimit(min(c.limit, int64(min(inUse+4*c.period+backstopSlack, math.MaxInt64))))
}

// collectIfDue collects the heap, timed, when the bytes allocated
// (allocated, read from /gc/heap/allocs:bytes) since the last
// collection reach the period.
func (c *gcCharge) collectIfDue(allocated uint64) {
	if allocated-c.since < c.period {
		return
	}
	c.collect()
}

func (c *gcCharge) collect() {
	cpu, start := processCPU(), time.Now()
	runtime.GC()
	c.wall += time.Since(start)
	c.cpu += processCPU() - cpu
	c.collections++
	c.rearm()
}

// automaticSince is how many collections the runtime started by itself
// since startCharging: with automatic collection off, only for the
// memory limit rearm sets.
func (c *gcCharge) automaticSince() uint64 {
	m := []metrics.Sample{{Name: "/gc/cycles/automatic:gc-cycles"}}
	metrics.Read(m)
	return m[0].Value.Uint64() - c.automatic
}

// reset forgets the collections so far.
func (c *gcCharge) reset() { c.collections, c.wall, c.cpu, c.periods = 0, 0, 0, nil }

// finish makes sure the run paid for at least one collection: a run too
// short to reach the period (b.N pairs in a smoke test) is charged one
// collection of what it allocated.
func (c *gcCharge) finish() {
	if c.collections == 0 {
		c.collect()
	}
}

// stop turns automatic collection back on as it was, and the memory
// limit back to what it was.
func (c *gcCharge) stop() {
	debug.SetGCPercent(c.percent)
	debug.SetMemoryLimit(c.limit)
}

// pairRatio is a run's ratio from the ratios of its pairs: the geometric
// mean of the middle half (all of them below 4 pairs). Like a median it
// leaves out the pairs a burst of other work made extreme, and it averages
// the middle half, where a median takes one pair. The mean is taken of the
// ratios' logarithms so that it leans to neither side: the ratio of the
// sides swapped is exactly the inverse (an arithmetic mean of on/off
// ratios comes out above 1 for two sides that do the same work).
func pairRatio(ratios []float64) float64 {
	if len(ratios) == 0 {
		return 0
	}
	s := slices.Clone(ratios)
	slices.Sort(s)
	if len(s) >= 4 {
		q := len(s) / 4
		s = s[q : len(s)-q]
	}
	sum := 0.0
	for _, x := range s {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(s)))
}

// pairCI is the 95 % confidence interval of [pairRatio] over ratios:
// the Tukey–McLaughlin interval of the trimmed mean of the ratios'
// logarithms (the quarter at each end trimmed, as pairRatio trims; none
// below 4), its standard error from their winsorized spread and the
// t distribution's quantile for one less than the pairs kept. It
// assumes the pairs independent: a run whose sides differ by something
// the pairs share (their own goroutines, their memory) has rounds that
// spread wider than it. Below 2 ratios it is 0, 0.
func pairCI(ratios []float64) (lo, hi float64) {
	n := len(ratios)
	if n < 2 {
		return 0, 0
	}
	logs := make([]float64, n)
	for i, r := range ratios {
		logs[i] = math.Log(r)
	}
	slices.Sort(logs)
	g := 0
	if n >= 4 {
		g = n / 4
	}
	mean := 0.0
	for _, x := range logs[g : n-g] {
		mean += x
	}
	mean /= float64(n - 2*g)
	// The winsorized values: each trimmed one replaced by the nearest
	// value kept.
	wmean := 0.0
	for i := range logs {
		wmean += logs[min(max(i, g), n-g-1)]
	}
	wmean /= float64(n)
	ss := 0.0
	for i := range logs {
		d := logs[min(max(i, g), n-g-1)] - wmean
		ss += d * d
	}
	se := math.Sqrt(ss/float64(n-1)) / ((1 - 2*float64(g)/float64(n)) * math.Sqrt(float64(n)))
	half := tQuantile975(n-2*g-1) * se
	return math.Exp(mean - half), math.Exp(mean + half)
}

// tQuantile975 is the 97.5th percentile of Student's t distribution
// with df degrees of freedom (df ≥ 1): from a table up to 30, above it
// by the Cornish–Fisher expansion around the normal's (within 1e-4 there).
func tQuantile975(df int) float64 {
	table := [...]float64{12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
		2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
		2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423}
	if df < 1 {
		return math.Inf(1)
	}
	if df <= len(table) {
		return table[df-1]
	}
	const z = 1.959964
	v := float64(df)
	return z + (z*z*z+z)/(4*v) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*v*v)
}

// checksumSides returns the two sides (named names) of a checksums row
// whose figures come from one interleaved run per round (see
// [interleavedSides]), run as r says (r.until: how long; 0, b.N pairs),
// with checksums on or off as checks says: the baseline's figure is side
// 1's time per item, ours is that times the run's ratio from its pairs
// ([pairRatio]).
func checksumSides(names [2]string, checks [2]bool, perCPU bool, r pairRun, setup abSetup) (ours, base side) {
	return pairedRun(names, "ChecksumsAB", perCPU, true,
		func(b *testing.B, until time.Duration) abTotals {
			b.StopTimer()
			fx := setup(b, checks)
			if fx.done != nil {
				defer fx.done()
			}
			b.StartTimer()
			return runAB(b, fx, checks, r)
		}, r.until)
}

// interleavedSides returns the two sides (named names) of a row whose
// figures come from one interleaved run per round: whichever side the
// harness measures first in a round runs it (run, called by
// testing.Benchmark, makes a fresh setup for each of its calls) and keeps
// the other side's figure, which that side returns when it is measured
// next, in the same round. perCPU says whether a side's time is the
// process's CPU time in its slices (otherwise wall time), summed over
// them. The run lasts until (so testing.Benchmark calls it once), or b.N
// pairs if until is 0 (the smoke run: one pair). bench names the go test
// benchmark that shows a failed run's message.
func interleavedSides(names [2]string, bench string, perCPU bool, until time.Duration, run func(b *testing.B, until time.Duration) abTotals) (ours, base side) {
	return pairedRun(names, bench, perCPU, false, run, until)
}

// pairedRun is interleavedSides, with ours the baseline's time per item
// times the run's [pairRatio] if byPairs, instead of its own sum.
func pairedRun(names [2]string, bench string, perCPU, byPairs bool, run func(b *testing.B, until time.Duration) abTotals, until time.Duration) (ours, base side) {
	measure := func() [2]sample {
		var t abTotals
		r := testing.Benchmark(func(b *testing.B) { t = run(b, until) })
		var out [2]sample
		d, ratios := t.wall, t.wallRatios
		if perCPU {
			d, ratios = t.cpu, t.cpuRatios
		}
		for side, name := range names {
			switch {
			case r.N == 0 || t.items[0] == 0 || t.items[1] == 0:
				out[side].err = fmt.Errorf("%s: the interleaved run failed (run `go test -run '^$' -bench %s ./bench` for its message)", name, bench)
			case d[side] <= 0 || byPairs && len(ratios) == 0:
				out[side].err = fmt.Errorf("%s: the process's CPU time cannot be read here", name)
			default:
				out[side] = sample{ns: float64(d[side].Nanoseconds()) / float64(t.items[side]), allocs: float64(t.allocs[side]) / float64(t.items[side])}
			}
		}
		if byPairs && out[0].err == nil && out[1].err == nil {
			out[0].ns = out[1].ns * pairRatio(ratios)
			out[0].pairs = ratios
		}
		return out
	}
	first, second := pairedSides(measure)
	return side{name: names[0], measure: first}, side{name: names[1], measure: second}
}

// pairedSides returns the measures of two sides whose figures come from
// one call of run: whichever is called first calls run and keeps the
// other's figure for its next call. The harness calls each once a round,
// in either order, so each round's two figures come from the same run.
func pairedSides(run func() [2]sample) (first, second func() sample) {
	var kept [2]*sample // figures of the last run not yet returned
	measure := func(side int) sample {
		if kept[side] == nil {
			figures := run()
			kept = [2]*sample{&figures[0], &figures[1]}
		}
		s := *kept[side]
		kept[side] = nil
		return s
	}
	return func() sample { return measure(0) }, func() sample { return measure(1) }
}

// persistAB returns the setup of an interleaved persist run: two bbolt
// stores in one folder, one a side, each written with checksums on or off
// as its side is (each file is consistent), and a slice in which writers
// goroutines persist each bursts events, one at a time and waiting for
// each, to their own actor of the side's store.
func persistAB(writers, burst int, opts *boltstore.Options) abSetup {
	return func(b *testing.B, _ [2]bool) abFixture {
		var stores [2]*boltstore.Store
		for i, name := range []string{"side0.db", "side1.db"} {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), name), opts)
			if err != nil {
				b.Fatal(err)
			}
			stores[i] = s
		}
		names := make([]string, writers)
		for w := range names {
			names[w] = fmt.Sprintf("stream-%03d", w)
		}
		next := [2][]uint64{make([]uint64, writers), make([]uint64, writers)} // each writer's next index, per store
		data := bytes.Repeat([]byte{'c'}, eventSize)
		ctx := context.Background()
		checked := [2]bool{true, true} // how each store is written
		slice := func(side int, on bool) (int, error) {
			s := stores[side]
			checked[side] = on
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for w := range writers {
				wg.Go(func() {
					for range burst {
						if err := s.PersistEvent(ctx, names[w], next[side][w], data); err != nil {
							errs[w] = err
							return
						}
						next[side][w]++
					}
				})
			}
			wg.Wait()
			return writers * burst, errors.Join(errs...)
		}
		return abFixture{slice: slice, done: func() {
			// Each store is closed (and checkpointed) as it was written.
			for side, s := range stores {
				if err := withChecks(checked[side], s.Close); err != nil {
					b.Error(err)
				}
			}
		}}
	}
}

// readAB returns the setup of an interleaved read run: one bbolt file
// holding recoveryEntries events of one actor written with checksums, in
// batches of 1000, opened again (so read from the actor's bucket, the log
// checkpointed by Open), and a slice that reads them all
// back once, checking them or not.
func readAB(b *testing.B, _ [2]bool) abFixture {
	path := filepath.Join(b.TempDir(), "reads.db")
	s, err := noSyncBolt(path)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte{'r'}, eventSize)
	}
	for i := 0; i < recoveryEntries; i += len(batch) {
		if err := s.PersistEvents(context.Background(), "router", uint64(i), batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = noSyncBolt(path); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	slice := func(int, bool) (int, error) {
		n := 0
		if err := s.GetEvents(ctx, "router", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
			return 0, err
		}
		if n != recoveryEntries {
			return 0, fmt.Errorf("read %d events, want %d", n, recoveryEntries)
		}
		return 1, nil
	}
	return abFixture{slice: slice, done: func() { s.Close() }}
}

// abTime is how long an interleaved checksums run lasts: times
// -benchtime, or 0 (b.N pairs) where -benchtime is a count ("1x").
func (c *config) abTime(times int) time.Duration {
	d, err := time.ParseDuration(c.benchtime)
	if err != nil {
		return 0
	}
	return time.Duration(times) * d
}
