package main

import (
	"context"
	"runtime/pprof"
	"testing"
	"time"
)

// BenchmarkRunsAB runs figure 7's interleaved rows (see runs_ab.go) as
// plain benchmarks, reporting each side's time per run (its share of the
// collections' time included, and reported apart: gc-ns/run), its bytes
// allocated per run, the collections charged (with the live heap after
// the first and the last, and the period set after the last), and the ratios (a over b) from the pairs, in wall time and in the process's CPU time
// (steadier than wall time on a machine shared with other work). With
// -cpuprofile, the samples of each side's goroutines carry its label
// (side a or b, see sideLabels): go tool pprof -tagfocus side=a shows one
// side; the collections between slices and the scheduler's own work
// carry none.
func BenchmarkRunsAB(b *testing.B) {
	for _, c := range []struct {
		name string
		run  func(b *testing.B, until time.Duration) abTotals
	}{
		{"inspector", inspectedAB},
		{"inspector-phases", inspectedPhases},
		{"loop-aa", loopAA},
		{"loop-phases-aa", loopPhasesAA},
		{"inspected-phases-aa", inspectedPhasesAA},
		{"agent", agentAB},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			t := c.run(b, 0)
			b.StopTimer()
			for side, name := range []string{"a", "b"} {
				b.ReportMetric(float64(t.wall[side].Nanoseconds())/float64(t.items[side]), name+"-ns/run")
				b.ReportMetric(float64(t.gcWall[side].Nanoseconds())/float64(t.items[side]), name+"-gc-ns/run")
				b.ReportMetric(float64(t.bytes[side])/float64(t.items[side]), name+"-B/run")
			}
			b.ReportMetric(float64(t.collections), "collections")
			if len(t.periods) > 0 {
				first, last := t.periods[0], t.periods[len(t.periods)-1]
				b.ReportMetric(float64(first.live)/(1<<20), "live-MiB-first")
				b.ReportMetric(float64(last.live)/(1<<20), "live-MiB-last")
				b.ReportMetric(float64(last.period)/(1<<20), "period-MiB-last")
			}
			b.ReportMetric(pairRatio(t.wallRatios), "wall-ratio")
			b.ReportMetric(pairRatio(t.cpuRatios), "cpu-ratio")
		})
	}
}

// The runs of each side are labelled with the side, for profiles split
// by side.
func TestRunsABLabelsSides(t *testing.T) {
	var seen [2]map[string]int
	for i := range seen {
		seen[i] = map[string]int{}
	}
	side := func(i int) func(context.Context) error {
		return func(ctx context.Context) error {
			label, _ := pprof.Label(ctx, "side")
			seen[i][label]++
			return nil
		}
	}
	var totals abTotals
	testing.Benchmark(func(b *testing.B) {
		totals = runsAB(b, 0, [2]func(context.Context) error{side(0), side(1)})
	})
	if totals.items[0] == 0 || totals.items[0] != totals.items[1] {
		t.Fatalf("runs %v, want as many on both sides", totals.items)
	}
	for i, want := range []string{"a", "b"} {
		if len(seen[i]) != 1 || seen[i][want] == 0 {
			t.Errorf("side %d ran with labels %v, want side %q only", i, seen[i], want)
		}
	}
}
