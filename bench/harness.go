package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// config is what one run of the harness measures and how long it takes.
type config struct {
	// rounds is how many times each pair (ours, baseline) is measured,
	// interleaved; medians are quoted.
	rounds int
	// benchtime is the -test.benchtime of each testing.Benchmark call
	// ("300ms", or "1x" for the smoke test).
	benchtime string
	// quick and smoke shrink the sizes: quick for a one-minute pass,
	// smoke for the test that keeps the harness from rotting.
	quick, smoke bool
	// filter selects figures and cases by "<figure> <case>"; skip then
	// leaves out those it matches.
	filter, skip *regexp.Regexp
	// progress receives a line per measurement; nil is silent.
	progress io.Writer
	// peers is the folder of the figure 7 peers; empty skips them.
	peers string
}

func (c *config) selected(figure, name string) bool {
	id := figure + " " + name
	return (c.filter == nil || c.filter.MatchString(id)) && (c.skip == nil || !c.skip.MatchString(id))
}

func (c *config) logf(format string, args ...any) {
	if c.progress != nil {
		fmt.Fprintf(c.progress, format+"\n", args...)
	}
}

// kind says how a row's numbers read: a throughput (higher is better, the
// ratio is ours/baseline in items per second) or a time (lower is better,
// the ratio is ours/baseline in time per operation).
type kind int

const (
	throughput kind = iota
	duration
	memory
)

// goal is what a row must reach: a bound on the ratio, on our absolute
// figure, or nothing (information only).
type goal struct {
	ratio    bool    // a bound on Ratio; otherwise on Ours
	atLeast  bool    // ≥ bound; otherwise ≤ bound
	bound    float64 // in the row's unit (ours) or as a ratio
	text     string
	disabled bool
}

func ratioAtLeast(x float64) goal {
	return goal{ratio: true, atLeast: true, bound: x, text: fmt.Sprintf("≥ %g×", x)}
}
func ratioAtMost(x float64) goal {
	return goal{ratio: true, bound: x, text: fmt.Sprintf("≤ %g×", x)}
}
func oursAtLeast(x float64, text string) goal {
	return goal{atLeast: true, bound: x, text: text}
}
func oursAtMost(x float64, text string) goal { return goal{bound: x, text: text} }

var info = goal{disabled: true, text: "info"}

// met says whether r meets g in its worst round: a goal that holds for
// the median but not in every round is not met. Rows without per-round
// figures (the linearity row, built from two others) are judged by their
// single value.
func (g goal) met(r *Row) *bool {
	if g.disabled || r.Error != "" {
		return nil
	}
	v, lo, hi := r.Ours, r.OursMin, r.OursMax
	if g.ratio {
		v, lo, hi = r.Ratio, r.RatioMin, r.RatioMax
	}
	switch {
	case g.atLeast && lo != 0:
		v = lo
	case !g.atLeast && hi != 0:
		v = hi
	}
	ok := v <= g.bound
	if g.atLeast {
		ok = v >= g.bound
	}
	return &ok
}

// Row is one line of the table: a figure's case, our median, the
// baseline's median measured in the same run, their ratio, the goal.
type Row struct {
	Figure string `json:"figure"`
	Case   string `json:"case"`
	// Unit is the unit of Ours and Baseline: "frames/s", "µs/call", ...
	Unit     string  `json:"unit"`
	Ours     float64 `json:"ours"`
	Baseline float64 `json:"baseline,omitempty"`
	// BaselineName says what the baseline is.
	BaselineName string `json:"baseline_name,omitempty"`
	// Ratio is ours/baseline: in items per second for throughputs, in
	// time per operation for times (the median of the per-round ratios).
	Ratio float64 `json:"ratio,omitempty"`
	// RatioMin and RatioMax are the lowest and highest per-round ratios
	// (oriented as Ratio): the spread the table prints next to the median.
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
	// OursMin and OursMax are the lowest and highest per-round figures of
	// ours, in Unit (goals on our figure are judged by the worst of them).
	OursMin float64 `json:"ours_min,omitempty"`
	OursMax float64 `json:"ours_max,omitempty"`
	// CILow and CIHigh bound the 95 % confidence interval of the ratio
	// (oriented as Ratio) over the pairs of all rounds of a row
	// measured by pairs of slices ([pairCI] of them pooled), CIPairs
	// their number; information only: the goal is judged by the worst
	// round. Rounds spread wider than it when what moves them is shared
	// by a run's pairs.
	CILow   float64 `json:"ci_low,omitempty"`
	CIHigh  float64 `json:"ci_high,omitempty"`
	CIPairs int     `json:"ci_pairs,omitempty"`
	Goal    string  `json:"goal"`
	// Met is nil for information rows and rows that failed.
	Met *bool `json:"met"`
	// OursAllocs and BaselineAllocs are allocations per operation.
	OursAllocs     float64 `json:"ours_allocs_per_op"`
	BaselineAllocs float64 `json:"baseline_allocs_per_op,omitempty"`
	Rounds         int     `json:"rounds"`
	// Note explains the row (what bounds it, why a peer did not run).
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// sample is one measurement: time per operation and allocations; for
// a side measured by pairs of slices against the other, the ratios of
// its pairs (its time per item over the other's).
type sample struct {
	ns, allocs float64
	pairs      []float64
	err        error
}

// side is one contestant of a pair.
type side struct {
	name    string
	measure func() sample
}

// benchSide measures fn with testing.Benchmark.
func benchSide(name string, fn func(b *testing.B)) side { return metricSide(name, "", fn) }

// metricSide is benchSide for bodies whose operations are not exactly
// b.N: the time per item is taken from the "<items>/s" metric the body
// reports with b.ReportMetric (empty metric: time per b.N op).
func metricSide(name, metric string, fn func(b *testing.B)) side {
	return side{name: name, measure: func() sample {
		r := testing.Benchmark(fn)
		if r.N == 0 {
			return sample{err: fmt.Errorf("%s: benchmark failed (run `go test -run '^$' -bench . ./bench` for its message)", name)}
		}
		s := sample{ns: float64(r.T.Nanoseconds()) / float64(r.N), allocs: float64(r.AllocsPerOp())}
		if metric != "" {
			perSec, ok := r.Extra[metric]
			if !ok || perSec <= 0 {
				return sample{err: fmt.Errorf("%s: no %s metric reported", name, metric)}
			}
			s.ns = 1e9 / perSec
		}
		return s
	}}
}

// pair is a row to measure: ours against a baseline, interleaved.
type pair struct {
	figure, name string
	ours, base   side
	kind         kind
	// unit names what one operation moves; per is how many of them one
	// operation is (frames per op, bytes per op...).
	unit string
	per  float64
	goal goal
	note string
}

// compare measures p.ours and p.base alternately, c.rounds times each
// (ours first in even rounds, the baseline first in odd ones), and returns
// the row with medians and the median per-round ratio.
func (c *config) compare(p pair) Row {
	row := Row{Figure: p.figure, Case: p.name, BaselineName: p.base.name, Goal: p.goal.text, Note: p.note}
	if p.per == 0 {
		p.per = 1
	}
	var ours, base, ratios, oa, ba, pairs []float64
	for round := range c.rounds {
		// Odd rounds measure the baseline first: whichever side goes
		// first in a round meets a machine in a different state (caches,
		// heap, frequency, a neighbour's load) than the side after it,
		// and alternating the order keeps that from favouring one side.
		var o, b sample
		switch {
		case p.base.measure == nil:
			o = c.within(p.ours)
		case round%2 == 1:
			b = c.within(p.base)
			o = c.within(p.ours)
		default:
			o = c.within(p.ours)
			b = c.within(p.base)
		}
		if err := cmpErr(o.err, b.err); err != nil {
			row.Error = err.Error()
			c.logf("  %s %s: %v", p.figure, p.name, err)
			break
		}
		ours, oa = append(ours, o.ns), append(oa, o.allocs)
		pairs = append(pairs, o.pairs...)
		if p.base.measure != nil {
			base, ba = append(base, b.ns), append(ba, b.allocs)
			ratios = append(ratios, o.ns/b.ns)
		}
		c.logf("  %s %-40s round %d: ours %s, %s %s", p.figure, p.name, round+1,
			formatValue(p.kind, p.unit, p.per, o.ns), p.base.name, formatValue(p.kind, p.unit, p.per, b.ns))
	}
	row.Rounds = len(ours)
	if row.Error == "" {
		row.Unit = unitOf(p.kind, p.unit)
		row.Ours = valueOf(p.kind, p.per, median(ours))
		row.OursMin, row.OursMax = spread(ours, func(ns float64) float64 { return valueOf(p.kind, p.per, ns) })
		row.OursAllocs = median(oa)
		if len(base) > 0 {
			row.Baseline = valueOf(p.kind, p.per, median(base))
			row.BaselineAllocs = median(ba)
			orient := func(r float64) float64 { return r }
			if p.kind == throughput {
				orient = func(r float64) float64 { return 1 / r }
			}
			row.Ratio = orient(median(ratios))
			row.RatioMin, row.RatioMax = spread(ratios, orient)
			if lo, hi := pairCI(pairs); lo > 0 {
				row.CILow, row.CIHigh = spread([]float64{lo, hi}, orient)
				row.CIPairs = len(pairs)
			}
		}
	}
	row.Met = p.goal.met(&row)
	return row
}

// within measures s, giving up after measureLimit: a body that hangs
// becomes an error row instead of a harness that never ends (its goroutine
// is left behind).
func (c *config) within(s side) sample {
	done := make(chan sample, 1)
	go func() { done <- s.measure() }()
	select {
	case r := <-done:
		return r
	case <-time.After(measureLimit):
		return sample{err: fmt.Errorf("%s: no result within %v", s.name, measureLimit)}
	}
}

// measureLimit bounds one measurement.
const measureLimit = 2 * time.Minute

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func unitOf(k kind, unit string) string {
	switch k {
	case throughput:
		return unit + "/s"
	case memory:
		return unit
	}
	return "µs/" + unit
}

// valueOf converts a median ns/op into the row's unit.
func valueOf(k kind, per, ns float64) float64 {
	switch k {
	case throughput:
		return per * 1e9 / ns
	case memory:
		return ns
	}
	return ns / per / 1e3
}

func formatValue(k kind, unit string, per, ns float64) string {
	if ns == 0 {
		return "-"
	}
	return humanize(valueOf(k, per, ns)) + " " + unitOf(k, unit)
}

// spread returns the lowest and highest of f(x) over xs.
func spread(xs []float64, f func(float64) float64) (lo, hi float64) {
	for i, x := range xs {
		v := f(x)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// humanize prints three significant digits with a k/M suffix.
func humanize(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 100e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	case a >= 10e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// Report is the whole run, as -json writes it.
type Report struct {
	Date    time.Time `json:"date"`
	Machine Machine   `json:"machine"`
	Mode    string    `json:"mode"`
	Rounds  int       `json:"rounds"`
	Rows    []Row     `json:"rows"`
}

// writeTable prints the rows as an aligned text table.
func writeTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tcase\tours\tbaseline\tratio\trounds\t95% CI (pairs)\tgoal\tmet\tallocs/op ours (base)")
	for _, r := range rows {
		met := "-"
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*r.Met]
		}
		ours, base, ratio, rounds, ci := "-", "-", "-", "-", "-"
		if r.Error == "" {
			ours = humanize(r.Ours) + " " + r.Unit
			if r.BaselineName != "" {
				base = humanize(r.Baseline) + " " + r.Unit + " (" + r.BaselineName + ")"
			}
			if r.Ratio != 0 {
				ratio = fmt.Sprintf("%.2f×", r.Ratio)
			}
			if r.Rounds > 1 {
				switch {
				case r.RatioMin != 0:
					rounds = fmt.Sprintf("%.2f–%.2f", r.RatioMin, r.RatioMax)
				case r.OursMin != 0:
					rounds = humanize(r.OursMin) + "–" + humanize(r.OursMax)
				}
			}
			if r.CIPairs > 0 {
				ci = fmt.Sprintf("%.2f–%.2f (%d)", r.CILow, r.CIHigh, r.CIPairs)
			}
		} else {
			ours = "error"
			met = "NO"
		}
		allocs := "-"
		if r.Error == "" && r.Unit != "" && !strings.HasPrefix(r.Unit, "KiB") && !strings.HasPrefix(r.Unit, "ms") {
			allocs = humanize(r.OursAllocs)
			if r.BaselineName != "" {
				allocs += " (" + humanize(r.BaselineAllocs) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Figure, r.Case, ours, base, ratio, rounds, ci, r.Goal, met, allocs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "figure %s %s: %s\n", r.Figure, r.Case, r.Error)
		} else if r.Note != "" {
			fmt.Fprintf(w, "figure %s %s: %s\n", r.Figure, r.Case, r.Note)
		}
	}
	return nil
}

func writeJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
