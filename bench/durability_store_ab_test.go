package main

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"testing"
	"time"
)

// TestPairedSides checks that both figures of a round come from the same
// run whichever side the harness measures first (it alternates), and
// that every round makes a run of its own.
func TestPairedSides(t *testing.T) {
	runs := 0
	on, off := pairedSides(func() [2]sample {
		runs++
		return [2]sample{{ns: float64(runs)}, {ns: float64(-runs)}}
	})
	for round := 1; round <= 6; round++ {
		var o, b sample
		if round%2 == 0 {
			b, o = off(), on()
		} else {
			o, b = on(), off()
		}
		if o.ns != float64(round) || b.ns != -float64(round) {
			t.Fatalf("round %d: on from run %v, off from run %v, want both from run %d", round, o.ns, -b.ns, round)
		}
	}
	if runs != 6 {
		t.Errorf("6 rounds made %d runs", runs)
	}
}

// TestPairRatio checks that a run's ratio leaves out its extreme pairs
// (the quarter at each end) and takes the geometric mean of the rest (of
// all of them below 4), and that it leans to neither side: the ratios
// inverted (the sides swapped) give exactly its inverse.
func TestPairRatio(t *testing.T) {
	for _, c := range []struct {
		ratios []float64
		want   float64
	}{
		{[]float64{1.0, 1.02, 0.98, 1.0, 3.0, 0.3, 1.0, 1.0}, 1.0},
		{[]float64{0.5, 2, 4, 0.25, 1, 1}, 1},
		{[]float64{1.1, 1.3}, math.Sqrt(1.1 * 1.3)},
		{[]float64{0.9}, 0.9},
		{nil, 0},
	} {
		if got := pairRatio(c.ratios); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("pairRatio(%v) = %v, want %v", c.ratios, got, c.want)
		}
	}
	ratios := []float64{0.85, 0.9, 1.18, 1.02, 0.7, 1.4, 1.1, 0.95, 1.3}
	inverse := make([]float64, len(ratios))
	for i, r := range ratios {
		inverse[i] = 1 / r
	}
	if got, swapped := pairRatio(ratios), pairRatio(inverse); math.Abs(got*swapped-1) > 1e-12 {
		t.Errorf("pairRatio = %v, with the sides swapped %v: their product is %v, want 1", got, swapped, got*swapped)
	}
}

// TestPairRun checks how a timed interleaved run counts: its warm-up
// pairs run but are not counted, every counted pair gives one wall ratio
// (and one CPU ratio where its CPU time could be told apart), and with gc
// every slice, warm-up included, starts with a collection, and after runs
// once after each slice, for its side.
func TestPairRun(t *testing.T) {
	var calls, afters [2]int
	var trail []int // the sides of the slices (0, 1) and of the afters (10, 11)
	slices := [2]func() (int, error){
		func() (int, error) { calls[0]++; trail = append(trail, 0); return 3, nil },
		func() (int, error) { calls[1]++; trail = append(trail, 1); return 5, nil },
	}
	after := func(side int) error { afters[side]++; trail = append(trail, 10+side); return nil }
	forced := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(forced)
	before := forced[0].Value.Uint64()
	var tot abTotals
	testing.Benchmark(func(b *testing.B) {
		calls, afters, trail = [2]int{}, [2]int{}, nil // testing.Benchmark may call this more than once
		tot = pairRun{until: time.Millisecond, warmup: 2, gc: true, after: after}.run(b, slices)
	})
	metrics.Read(forced)
	if calls[0] != calls[1] {
		t.Fatalf("side 0 ran %d slices, side 1 %d", calls[0], calls[1])
	}
	pairs := calls[0] - 2
	if pairs < 1 || tot.items != [2]int{3 * pairs, 5 * pairs} {
		t.Fatalf("%d slices a side, 2 of them warm-up: items %v, want %d and %d", calls[0], tot.items, 3*pairs, 5*pairs)
	}
	if len(tot.wallRatios) != pairs || len(tot.cpuRatios) > pairs {
		t.Errorf("%d pairs gave %d wall and %d CPU ratios, want %d", pairs, len(tot.wallRatios), len(tot.cpuRatios), pairs)
	}
	if afters != calls {
		t.Errorf("slices %v, afters %v", calls, afters)
	}
	for i := 0; i+1 < len(trail); i += 2 {
		if trail[i] > 1 || trail[i+1] != 10+trail[i] {
			t.Fatalf("slice and after out of step at %d: %v", i, trail)
		}
	}
	if got := forced[0].Value.Uint64() - before; got < uint64(2*calls[0]) {
		t.Errorf("%d slices, %d forced collections", 2*calls[0], got)
	}
}

// TestPairCI checks the interval of a run's ratio on inputs worked by
// hand: 8 pairs whose logarithms are ±0.3, ±0.1, ±0.05, 0, 0 (the
// quarter at each end winsorized to ±0.05: a spread of √(0.015/7), a
// standard error of that over 0.5·√8, t at 3 degrees of freedom
// 3.1824) give exp(±0.10417); that the interval holds the ratio, leans
// to neither side (the sides swapped invert it), and narrows as pairs
// that agree are added.
func TestPairCI(t *testing.T) {
	ratios := []float64{}
	for _, l := range []float64{-0.3, -0.1, -0.05, 0, 0, 0.05, 0.1, 0.3} {
		ratios = append(ratios, math.Exp(l))
	}
	lo, hi := pairCI(ratios)
	if math.Abs(lo-math.Exp(-0.104170)) > 1e-5 || math.Abs(hi-math.Exp(0.104170)) > 1e-5 {
		t.Errorf("pairCI = %.5f–%.5f, want %.5f–%.5f", lo, hi, math.Exp(-0.104170), math.Exp(0.104170))
	}
	// Without trimming (3 pairs): logs 0, 0.1, 0.2, mean 0.1, standard
	// error 0.1/√3, t at 2 degrees of freedom 4.3027.
	lo, hi = pairCI([]float64{1, math.Exp(0.1), math.Exp(0.2)})
	if half := 4.3027 * 0.1 / math.Sqrt(3); math.Abs(lo-math.Exp(0.1-half)) > 1e-5 || math.Abs(hi-math.Exp(0.1+half)) > 1e-5 {
		t.Errorf("pairCI of 3 = %.5f–%.5f, want %.5f–%.5f", lo, hi, math.Exp(0.1-half), math.Exp(0.1+half))
	}
	if lo, hi := pairCI([]float64{1.1}); lo != 0 || hi != 0 {
		t.Errorf("pairCI of one pair = %v–%v, want none", lo, hi)
	}
	wide := []float64{0.85, 0.9, 1.18, 1.02, 0.7, 1.4, 1.1, 0.95, 1.3, 1.05, 0.99}
	inverse := make([]float64, len(wide))
	for i, r := range wide {
		inverse[i] = 1 / r
	}
	lo, hi = pairCI(wide)
	ilo, ihi := pairCI(inverse)
	if r := pairRatio(wide); !(lo < r && r < hi) || math.Abs(lo*ihi-1) > 1e-12 || math.Abs(hi*ilo-1) > 1e-12 {
		t.Errorf("pairCI = %v–%v around %v; swapped %v–%v, want its inverse", lo, hi, r, ilo, ihi)
	}
	more := slices.Clone(wide)
	for range 40 {
		more = append(more, 1.0, 1.01, 0.99)
	}
	if mlo, mhi := pairCI(more); mhi-mlo >= hi-lo {
		t.Errorf("with 120 more pairs close to 1 the interval %v–%v is no narrower than %v–%v", mlo, mhi, lo, hi)
	}
	// Beyond the table, the expansion meets it at 30 and tends to the
	// normal's 1.96.
	if got := tQuantile975(31); got >= tQuantile975(30) || math.Abs(got-2.0395) > 1e-4 {
		t.Errorf("t(31) = %v, want 2.0395 (below t(30) = %v)", got, tQuantile975(30))
	}
	if got := tQuantile975(1000); math.Abs(got-1.9623) > 1e-4 {
		t.Errorf("t(1000) = %v, want 1.9623", got)
	}
}

// TestPairRun_ChargesCollections checks that with chargeGC no
// collection runs inside a slice, that the collections run between
// slices are charged to the sides by the bytes they allocated (side 0
// allocates three times side 1's), included in their totals, and that
// automatic collection is back on afterwards.
func TestPairRun_ChargesCollections(t *testing.T) {
	cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	inSlices := 0 // collections completed during a slice
	var sink [][]byte
	alloc := func(kib int) func() (int, error) {
		return func() (int, error) {
			metrics.Read(cycles)
			before := cycles[0].Value.Uint64()
			sink = sink[:0]
			for range kib {
				sink = append(sink, make([]byte, 1024))
			}
			metrics.Read(cycles)
			inSlices += int(cycles[0].Value.Uint64() - before)
			return 1, nil
		}
	}
	percent := debug.SetGCPercent(100)
	defer debug.SetGCPercent(percent)
	var tot abTotals
	testing.Benchmark(func(b *testing.B) {
		inSlices = 0
		tot = pairRun{until: 50 * time.Millisecond, warmup: 2, chargeGC: true}.run(b, [2]func() (int, error){alloc(3 << 10), alloc(1 << 10)})
	})
	if inSlices != 0 {
		t.Errorf("%d collections ran inside slices", inSlices)
	}
	if tot.collections == 0 || tot.gcWall[0] <= 0 || tot.gcCPU[0] < 0 {
		t.Fatalf("%d collections charged %v wall, %v CPU to side 0", tot.collections, tot.gcWall[0], tot.gcCPU[0])
	}
	if b := float64(tot.bytes[0]) / float64(tot.bytes[1]); b < 2.7 || b > 3.3 {
		t.Errorf("side 0 allocated %d bytes, side 1 %d: want 3 times as many", tot.bytes[0], tot.bytes[1])
	}
	for _, c := range []struct {
		name      string
		charged   [2]time.Duration
		whole     [2]time.Duration
		collected time.Duration
	}{{"wall", tot.gcWall, tot.wall, tot.collectedWall}, {"CPU", tot.gcCPU, tot.cpu, tot.collectedCPU}} {
		// Each slice's charge is rounded down to the nanosecond.
		if d := c.collected - c.charged[0] - c.charged[1]; d < 0 || d > time.Duration(2*tot.items[0]) {
			t.Errorf("%s: the collections cost %v, the sides were charged %v and %v", c.name, c.collected, c.charged[0], c.charged[1])
		}
		byBytes := float64(tot.bytes[0]) / float64(tot.bytes[1])
		if c.charged[1] > 0 && math.Abs(float64(c.charged[0])/float64(c.charged[1])/byBytes-1) > 1e-3 {
			t.Errorf("%s charged %v and %v, not in the ratio of the bytes (%.3f)", c.name, c.charged[0], c.charged[1], byBytes)
		}
		for side := range 2 {
			if c.whole[side] < c.charged[side] {
				t.Errorf("side %d: %s %v does not include the %v charged", side, c.name, c.whole[side], c.charged[side])
			}
		}
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after the run %d, want 100 again", got)
	}
}

// TestPairRun_ChargePeriodFollowsLiveHeap checks that the period between
// the collections of a charged run follows the live heap as the
// runtime's pacer does (GOGC 100: at least the live heap), rather than
// staying what it was when the run began: side 0 keeps 512 KiB of every
// slice, so the live heap grows to tens of MiB, and a period fixed at
// the start (4 MiB) would collect ever more often, each collection
// costlier, than the runtime would.
func TestPairRun_ChargePeriodFollowsLiveHeap(t *testing.T) {
	var kept [][]byte
	var garbage []byte
	sides := [2]func() (int, error){
		func() (int, error) {
			for range 8 {
				kept = append(kept, make([]byte, 64<<10))
			}
			return 1, nil
		},
		func() (int, error) {
			for range 8 {
				garbage = make([]byte, 64<<10)
			}
			return 1, nil
		},
	}
	percent := debug.SetGCPercent(100)
	defer debug.SetGCPercent(percent)
	var tot abTotals
	testing.Benchmark(func(b *testing.B) {
		kept = nil
		tot = pairRun{until: 80 * time.Millisecond, warmup: 2, chargeGC: true}.run(b, sides)
	})
	_ = garbage
	if len(tot.periods) < 2 {
		t.Fatalf("%d collections recorded, want several", len(tot.periods))
	}
	for i, p := range tot.periods {
		if p.period < p.live*9/10 {
			t.Errorf("collection %d: live heap %d KiB, next period %d KiB: shorter than the runtime's (GOGC 100)", i, p.live>>10, p.period>>10)
		}
	}
	kept = nil
}

// TestPairRun_ChargeBoundsHeap checks that a charged run whose slice
// allocates far beyond the period cannot grow the heap without bound
// while automatic collection is off: a memory limit makes the runtime
// collect, and the run fails saying so (a collection inside a slice
// makes its charge wrong); automatic collection and the memory limit
// are back as they were after the failure.
func TestPairRun_ChargeBoundsHeap(t *testing.T) {
	var sink []byte
	big := 0
	sides := [2]func() (int, error){
		func() (int, error) {
			big++
			n := 1
			if big > 3 { // after the warm-up: 512 MiB in 64 KiB pieces
				n = 1 << 13
			}
			for range n {
				sink = make([]byte, 64<<10)
			}
			return 1, nil
		},
		func() (int, error) { sink = make([]byte, 1<<10); return 1, nil },
	}
	percent := debug.SetGCPercent(100)
	defer debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(-1)
	ms := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(ms)
	mapped := ms[0].Value.Uint64()
	var failed bool
	testing.Benchmark(func(b *testing.B) {
		big = 0
		defer func() { failed = b.Failed() }()
		pairRun{until: 50 * time.Millisecond, warmup: 2, chargeGC: true}.run(b, sides)
	})
	_ = sink
	metrics.Read(ms)
	if !failed {
		t.Error("a run whose slice allocated 512 MiB did not fail")
	}
	if grown := ms[0].Value.Uint64() - mapped; grown > 256<<20 {
		t.Errorf("the runtime mapped %d MiB more over a run whose slice allocated 512 MiB: want the heap bounded", grown>>20)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after the failed run %d, want 100 again", got)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("memory limit after the failed run %d, want %d again", got, limit)
	}
}
