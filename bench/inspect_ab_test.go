package main

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkInspectedInterleaved measures the inspector's cost in CPU time
// rather than wall time: the conversation with the inspector mounted and
// followed, and the same conversation without it, both started once and
// played in batches taken in turn (each pair's order drawn at random, as
// runPairs does: a fixed order lets work that recurs every few batches
// fall on one side), the process's CPU time read around each batch. On a
// machine shared with other work, CPU time per run compared batch by
// batch moves less than wall time (still by a few percent from one
// invocation to the next: compare several). It reports the CPU time per
// run of each side (medians over the batches) and the median of the
// batches' ratios ("cpu-ratio", goal ≤ 1.1; robust to the machine's load
// drifting between batches). One op is a pair of batches: its
// allocations are those of 2×200 runs.
func BenchmarkInspectedInterleaved(b *testing.B) {
	with, closeInspector, err := newInspectedConversation()
	if err != nil {
		b.Fatal(err)
	}
	defer closeInspector()
	defer with.Close()
	without, err := newTappedConversation(true, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer without.Close()
	ctx := context.Background()
	const batch = 200
	batchCPU := func(lc *loopConversation) time.Duration {
		cpu := processCPU()
		for range batch {
			if err := lc.run(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return processCPU() - cpu
	}
	batchCPU(with) // warm both up
	batchCPU(without)
	b.ReportAllocs()
	b.ResetTimer()
	var ratios, withs, withouts []float64
	for range b.N {
		var w, wo time.Duration
		if rand.IntN(2) == 0 { // which side goes first: at random, as runPairs
			w, wo = batchCPU(with), batchCPU(without)
		} else {
			wo, w = batchCPU(without), batchCPU(with)
		}
		if w <= 0 || wo <= 0 {
			continue // the process's CPU time cannot be read here
		}
		withs = append(withs, float64(w)/batch)
		withouts = append(withouts, float64(wo)/batch)
		ratios = append(ratios, float64(w)/float64(wo))
	}
	b.StopTimer()
	if len(ratios) == 0 {
		return
	}
	b.ReportMetric(median(withs), "with-cpu-ns/run")
	b.ReportMetric(median(withouts), "without-cpu-ns/run")
	b.ReportMetric(median(ratios), "cpu-ratio")
}

// BenchmarkRunsAB runs figure 7's interleaved rows (see runs_ab.go) as
// plain benchmarks, reporting each side's time per run and the ratio
// from the pairs.
func BenchmarkRunsAB(b *testing.B) {
	for _, c := range []struct {
		name string
		run  func(b *testing.B, until time.Duration) abTotals
	}{
		{"inspector", inspectedAB},
		{"loop-aa", loopAA},
		{"agent", agentAB},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			t := c.run(b, 0)
			b.StopTimer()
			for side, name := range []string{"a", "b"} {
				b.ReportMetric(float64(t.wall[side].Nanoseconds())/float64(t.items[side]), name+"-ns/run")
			}
			b.ReportMetric(pairRatio(t.wallRatios), "wall-ratio")
		})
	}
}
