package main

import (
	"testing"
	"time"
)

// BenchmarkRunsAB runs figure 7's interleaved rows (see runs_ab.go) as
// plain benchmarks, reporting each side's time per run and the ratios
// (a over b) from the pairs, in wall time and in the process's CPU time
// (steadier than wall time on a machine shared with other work).
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
			b.ReportMetric(pairRatio(t.cpuRatios), "cpu-ratio")
		})
	}
}
