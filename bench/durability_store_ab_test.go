package main

import (
	"math"
	"runtime/metrics"
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
