package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// scriptedSide returns a side whose measurements are ns, one per round.
func scriptedSide(name string, ns ...float64) side {
	i := 0
	return side{name: name, measure: func() sample {
		s := sample{ns: ns[i]}
		i++
		return s
	}}
}

// TestCompare_WorstRoundDecides checks that a row's goal is judged by its
// worst round, not its median, and that the spread is reported in the
// row's orientation (throughput ratios inverted from the times measured).
func TestCompare_WorstRoundDecides(t *testing.T) {
	c := &config{rounds: 3}
	// Throughput: ours takes 10/9/12.5 ns per item against 8 ns, so
	// ours÷baseline in items per second is 0.8, 0.889, 0.64.
	row := c.compare(pair{figure: "x", name: "throughput", kind: throughput, unit: "items",
		ours: scriptedSide("ours", 10, 9, 12.5), base: scriptedSide("base", 8, 8, 8), goal: ratioAtLeast(0.75)})
	if row.Ratio != 0.8 || row.RatioMin != 0.64 || row.RatioMax < 0.888 || row.RatioMax > 0.889 {
		t.Errorf("ratio %v, spread %v–%v; want 0.8, 0.64–0.889", row.Ratio, row.RatioMin, row.RatioMax)
	}
	if row.Met == nil || *row.Met {
		t.Errorf("median 0.8 ≥ 0.75 but the worst round 0.64 is not: met %v", row.Met)
	}

	// The same pair where every round meets the goal.
	row = c.compare(pair{figure: "x", name: "throughput", kind: throughput, unit: "items",
		ours: scriptedSide("ours", 10, 9, 10.5), base: scriptedSide("base", 8, 8, 8), goal: ratioAtLeast(0.75)})
	if row.Met == nil || !*row.Met {
		t.Errorf("every round ≥ 0.76: met %v (spread %v–%v)", row.Met, row.RatioMin, row.RatioMax)
	}

	// Time per operation with a goal on our figure: the slowest round decides.
	row = c.compare(pair{figure: "x", name: "time", kind: duration, unit: "op",
		ours: scriptedSide("ours", 100e3, 300e3, 120e3), goal: oursAtMost(200, "< 200 µs")})
	if row.Ours != 120 || row.OursMin != 100 || row.OursMax != 300 {
		t.Errorf("ours %v µs, spread %v–%v; want 120, 100–300", row.Ours, row.OursMin, row.OursMax)
	}
	if row.Met == nil || *row.Met {
		t.Errorf("median 120 µs < 200 µs but one round took 300 µs: met %v", row.Met)
	}

	// The table prints the spread next to the median ratio.
	var out bytes.Buffer
	row = c.compare(pair{figure: "x", name: "throughput", kind: throughput, unit: "items",
		ours: scriptedSide("ours", 10, 9, 12.5), base: scriptedSide("base", 8, 8, 8), goal: ratioAtLeast(0.75)})
	if err := writeTable(&out, []Row{row}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0.80×") || !strings.Contains(out.String(), "0.64–0.89") || !strings.Contains(out.String(), "NO") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestCompare_AlternatesWhichSideGoesFirst checks that rounds alternate
// the order of the two sides, so a side is not always measured right
// after the other one (or always first on a fresh machine state).
func TestCompare_AlternatesWhichSideGoesFirst(t *testing.T) {
	var order []string
	side := func(name string) side {
		return side{name: name, measure: func() sample {
			order = append(order, name)
			return sample{ns: 1}
		}}
	}
	c := &config{rounds: 4}
	c.compare(pair{figure: "x", name: "order", kind: duration, unit: "op", ours: side("o"), base: side("b")})
	if got, want := strings.Join(order, ""), "obboobbo"; got != want {
		t.Fatalf("measured in order %q, want %q", got, want)
	}
}

// TestCompare_PairsCI checks that a row measured by pairs gets the 95 %
// confidence interval of the ratio over all its rounds' pairs (as
// pairCI gives it for them pooled), in the row's orientation (a
// throughput's inverted), and that the table prints it; the goal is
// still judged by the worst round.
func TestCompare_PairsCI(t *testing.T) {
	rounds := [][]float64{{1.1, 1.2, 1.25}, {1.3, 1.2, 1.15, 1.22}, {1.18, 1.21}}
	var pooled []float64
	for _, r := range rounds {
		pooled = append(pooled, r...)
	}
	lo, hi := pairCI(pooled)
	i := 0
	ours := side{name: "ours", measure: func() sample {
		s := sample{ns: 12, pairs: rounds[i]}
		i++
		return s
	}}
	c := &config{rounds: 3}
	row := c.compare(pair{figure: "x", name: "throughput", kind: throughput, unit: "runs",
		ours: ours, base: scriptedSide("base", 10, 10, 10), goal: ratioAtLeast(0.83)})
	if math.Abs(row.CILow-1/hi) > 1e-12 || math.Abs(row.CIHigh-1/lo) > 1e-12 || row.CIPairs != len(pooled) {
		t.Errorf("CI %v–%v over %d pairs, want %v–%v over %d", row.CILow, row.CIHigh, row.CIPairs, 1/hi, 1/lo, len(pooled))
	}
	if row.Met == nil || !*row.Met || row.CILow >= 0.83 {
		t.Errorf("every round 0.833× ≥ 0.83, the interval %v–%v below it: met %v, want the worst round to decide", row.CILow, row.CIHigh, row.Met)
	}
	var out bytes.Buffer
	if err := writeTable(&out, []Row{row}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%.2f–%.2f", 1/hi, 1/lo); !strings.Contains(out.String(), want) {
		t.Errorf("table lacks the interval %s:\n%s", want, out.String())
	}

	// A row without pairs has none.
	i = 0
	row = c.compare(pair{figure: "x", name: "time", kind: duration, unit: "op",
		ours: scriptedSide("ours", 1, 2, 3), base: scriptedSide("base", 1, 1, 1)})
	if row.CILow != 0 || row.CIHigh != 0 || row.CIPairs != 0 {
		t.Errorf("a row without pairs has CI %v–%v over %d", row.CILow, row.CIHigh, row.CIPairs)
	}
}
