package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"
)

// Figure 7's goal rows whose two sides can live in one process (the
// inspector mounted or not, agent.Run or the raw loop) are also measured
// interleaved, as figure 4's checksum rows are: both sides started once,
// then played in pairs of slices of runSliceRuns conversations, the
// order of each two pairs balanced, a run's first pairs not counted, and
// a round's ratio taken from its pairs ([pairRatio]). Measured one side
// after the other for a whole round each, two sides that do the same
// work differ by up to ±15 % in a round on this kind of machine (the
// "tracing off" row is such a pair), more than the 10 % such a goal
// allows; slices a few milliseconds long, taken in turn, put the
// machine's drift on both sides.
//
// The garbage collector is kept out of the slices and its whole cost
// charged to the sides by the bytes each allocates ([pairRun].chargeGC):
// a collection of this process's heap costs about as much as a slice of
// 200 conversations, and one fell in about every tenth slice, so a
// round's ratio depended on which side the runtime happened to collect
// in, or, the pairs it fell in trimmed away as the extremes, left the
// collector's cost out of both sides. (The charge is the collections'
// own work; a concurrent cycle's cost to the code running beside it,
// write barriers and assists, is left out: measured on one loop, the
// charge was 55–75 % of what collecting as the runtime does added to a
// run's wall time.) What both sides still share in
// one process is split between them: a collection's cost is the same
// per byte for both sides (their live heaps are marked together), and
// goroutines of one side that work in the background (the inspector's
// clock and event stream) take the core from either side. The rows
// measured one side after the other, which keep those apart, stay in the
// table beside these.

// runSliceRuns is how many conversations one slice of an interleaved
// figure 7 row plays: a millisecond or two. Shorter slices give more
// pairs a round, each closer in time to its partner; every slice also
// pays for getting its side's code and data back into the caches, so
// not shorter still.
const runSliceRuns = 100

// runsAB plays pairs of slices of the two sides' conversations for until
// (see [pairRun.run]) and returns the totals, items counted in runs. The
// runs of side i get, and run on a goroutine labelled with, sideLabels(i).
func runsAB(b *testing.B, until time.Duration, sides [2]func(context.Context) error) abTotals {
	b.Helper()
	ctx := context.Background()
	defer pprof.SetGoroutineLabels(ctx)
	var slices [2]func() (int, error)
	for i, run := range sides {
		labelled := sideLabels(i) // what the side's runs start is its
		pprof.SetGoroutineLabels(labelled)
		if err := run(labelled); err != nil { // warm up: actors started
			b.Fatal(err)
		}
		slices[i] = func() (int, error) {
			pprof.SetGoroutineLabels(labelled)
			for range runSliceRuns {
				if err := run(labelled); err != nil {
					return 0, err
				}
			}
			return runSliceRuns, nil
		}
	}
	// The callers stop the timer while they start both sides; a stopped
	// timer would make testing.Benchmark take the pairs for free and ask
	// for ever more of them.
	b.StartTimer()
	return pairRun{until: until, warmup: 2, chargeGC: true}.run(b, slices)
}

// sideLabels is a context whose profiler labels name side i ("a" or
// "b"): the goroutines a side starts (its runtime's workers, on demand,
// the inspector's clock and event stream) inherit them from the
// goroutine that starts them, so a CPU profile of an interleaved
// benchmark splits by side (go tool pprof -tagfocus side=a).
func sideLabels(i int) context.Context {
	return pprof.WithLabels(context.Background(), pprof.Labels("side", string(rune('a'+i))))
}

// inspectedAB: side 0 with the inspector mounted and followed, side 1
// the same conversation without it.
func inspectedAB(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	with, without, _, stop := inspectedSides(b)
	defer stop()
	return runsAB(b, until, [2]func(context.Context) error{with.run, without.run})
}

// inspectedSides starts the two sides of the inspector's rows, each
// under its side's labels: the conversation with the inspector mounted
// and followed by client, and the same conversation without it; stop
// stops them all.
func inspectedSides(b *testing.B) (with, without *loopConversation, client *streamClient, stop func()) {
	defer pprof.SetGoroutineLabels(context.Background())
	pprof.SetGoroutineLabels(sideLabels(0)) // the goroutines each side starts now are its
	with, client, closeInspector, err := newInspectedConversation()
	if err != nil {
		b.Fatal(err)
	}
	pprof.SetGoroutineLabels(sideLabels(1))
	without, err = newTappedConversation(true, nil)
	if err != nil {
		with.Close()
		closeInspector()
		b.Fatal(err)
	}
	return with, without, client, func() {
		without.Close()
		with.Close()
		closeInspector()
	}
}

// The interleaved row charges a side with what its goroutines do during
// its slices, and the collector by the bytes counted in them. The
// inspector's side does work for its runs after its slice has ended:
// its event stream renders what changed at most every Interval (250 ms),
// far longer than a slice, so a view of its runs is rendered and read
// during whichever slice is running then, about half the time the
// other side's; and bytes allocated late are counted to the next slice.
// Both understate the inspector's cost. The same row measured in
// phases ([inspectedPhases]) keeps them on its side.

// phasesOf is how many phases a round of the row measured in phases
// lasts (its until over this is a phase), and phasesRound how many
// benchtimes a round lasts: phases of 525 ms at the harness's default
// benchtime, two Intervals of the inspector's stream and some, about a
// dozen pairs a round counted. An inspected phase gets a view at its
// start (its first run changed what the stream last sent), one every
// Interval, and the one its end waits for: up to about twice the views
// a stream following a host that runs all the time would render (four
// a second), each 0.3–1 ms of CPU (BenchmarkRender in inspect, quiet
// and loaded), under 1 % of the phase's; the row errs against the
// inspector by that. What a phase pays once (its view at the start, the
// wait for its last view, the inspector's clock ticking meanwhile) is
// the inspector's: shorter phases would charge it more per run (phases
// of 262 ms put the row 2–5 % higher). A round's ratio is the middle
// half of its pairs': the pairs a round counts come from its length,
// 56 benchtimes, about thirteen, three dropped at each end (with 28,
// six or seven, one dropped at each end: two slow pairs moved a round
// by several per cent).
const (
	phasesOf    = 32
	phasesRound = 56
)

// inspectedPhases is inspectedAB measured in phases: pairs of phases
// each a side's alone for until/phasesOf, their order balanced, each
// phase starting from a collected heap, the collector running as the
// runtime would in it, and the inspector's phase closed only once its
// stream has shown the phase's last run to the client (the view
// rendered, written and read: see streamClient.showing), so that the
// stream's work for the phase's runs is the phase's. Its time is the
// process's CPU time: the wait for the stream is mostly idle.
func inspectedPhases(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	with, without, client, stop := inspectedSides(b)
	defer stop()
	settle := func(ctx context.Context) error { return client.showing(ctx, "run-"+strconv.Itoa(with.runs)) }
	return phasesAB(b, until/phasesOf, until,
		[2]func(context.Context) error{with.run, without.run},
		[2]func(context.Context) error{settle, nil})
}

// phasesAB plays pairs of phases of the two sides' conversations for
// until, a phase as many runs as fit in phase (one at least), then the
// side's settle if it has one, inside the phase's measurement: what the
// side's goroutines do for the phase's runs after the last returned.
// Each phase starts from a collected heap (the collection outside it)
// and the collector runs in it as the runtime would: a phase allocates
// many periods, so the collections are each side's, but for the cycle a
// phase leaves unfinished. The first pair is not counted.
func phasesAB(b *testing.B, phase, until time.Duration, sides, settle [2]func(context.Context) error) abTotals {
	b.Helper()
	ctx := context.Background()
	defer pprof.SetGoroutineLabels(ctx)
	var slices [2]func() (int, error)
	for i, run := range sides {
		labelled := sideLabels(i)
		pprof.SetGoroutineLabels(labelled)
		if err := run(labelled); err != nil { // warm up: actors started
			b.Fatal(err)
		}
		slices[i] = func() (int, error) {
			pprof.SetGoroutineLabels(labelled)
			n := 0
			for start := time.Now(); n == 0 || time.Since(start) < phase; {
				for range 10 { // the clock read every 10 runs
					if err := run(labelled); err != nil {
						return 0, err
					}
				}
				n += 10
			}
			if settle[i] != nil {
				if err := settle[i](labelled); err != nil {
					return 0, err
				}
			}
			return n, nil
		}
	}
	b.StartTimer()
	return pairRun{until: until, warmup: 1, gc: true}.run(b, slices)
}

// loopPhasesAA is loopAA measured in phases, as the inspector's row in
// phases is (phasesAB, no settle): the spread of that method itself.
func loopPhasesAA(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	sides, stop := twoLoops(b)
	defer stop()
	return phasesAB(b, until/phasesOf, until, sides, [2]func(context.Context) error{})
}

// twoLoops starts two raw loops, each under its side's labels, for an
// A/A row; stop stops them.
func twoLoops(b *testing.B) (sides [2]func(context.Context) error, stop func()) {
	defer pprof.SetGoroutineLabels(context.Background())
	var loops []*loopConversation
	stop = func() {
		for _, lc := range loops {
			lc.Close()
		}
	}
	for i := range sides {
		pprof.SetGoroutineLabels(sideLabels(i))
		lc, err := newLoopConversation(true)
		if err != nil {
			stop()
			b.Fatal(err)
		}
		loops = append(loops, lc)
		sides[i] = lc.run
	}
	return sides, stop
}

// inspectedPhasesAA is the inspector's row in phases with the inspector
// mounted and followed on both sides, each its own (runtime, inspector,
// stream and client), each phase settled as the inspected one is there:
// the spread of that method with the inspector's own work (its folds,
// views, clock and collections) on both sides.
func inspectedPhasesAA(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	defer pprof.SetGoroutineLabels(context.Background())
	var sides, settle [2]func(context.Context) error
	for i := range sides {
		pprof.SetGoroutineLabels(sideLabels(i))
		lc, client, closeInspector, err := newInspectedConversation()
		if err != nil {
			b.Fatal(err)
		}
		defer closeInspector()
		defer lc.Close()
		sides[i] = lc.run
		settle[i] = func(ctx context.Context) error { return client.showing(ctx, "run-"+strconv.Itoa(lc.runs)) }
	}
	return phasesAB(b, until/phasesOf, until, sides, settle)
}

// loopAA: the raw loop against another of itself, the spread of the
// method.
func loopAA(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	sides, stop := twoLoops(b)
	defer stop()
	return runsAB(b, until, sides)
}

// agentAB: side 0 one agent's Run, side 1 the raw loop played by hand
// as a host would ([loopConversation.runByHand]).
func agentAB(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	defer pprof.SetGoroutineLabels(context.Background())
	pprof.SetGoroutineLabels(sideLabels(0))
	f, err := newAgentFleet(1, true)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	pprof.SetGoroutineLabels(sideLabels(1))
	lc, err := newLoopConversation(true)
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	runs := 0
	agentRun := func(ctx context.Context) error {
		runs++
		return f.run(ctx, 0, runs)
	}
	return runsAB(b, until, [2]func(context.Context) error{agentRun, lc.runByHand})
}

// interleavedRunRows are the interleaved figure 7 rows (see above).
func interleavedRunRows(c *config) []Row {
	until := c.abTime(3)
	inspOn, inspOff := pairedRun([2]string{"inspected", "without"}, "RunsAB/inspector", false, true, inspectedAB, until)
	aa, aa2 := pairedRun([2]string{"loop", "loop, again"}, "RunsAB/loop-aa", false, true, loopAA, until)
	agentOn, agentOff := pairedRun([2]string{"agent.Run", "raw loop"}, "RunsAB/agent", false, true, agentAB, until)
	phasesOn, phasesOff := pairedRun([2]string{"inspected", "without"}, "RunsAB/inspector-phases", true, true, inspectedPhases, c.abTime(phasesRound))
	phasesAA, phasesAA2 := pairedRun([2]string{"loop", "loop, again"}, "RunsAB/loop-phases-aa", true, true, loopPhasesAA, c.abTime(phasesRound))
	inspAA, inspAA2 := pairedRun([2]string{"inspected", "inspected, again"}, "RunsAB/inspected-phases-aa", true, true, inspectedPhasesAA, c.abTime(phasesRound))
	const how = "one run per round, the sides interleaved: both started once, then played in pairs of slices of 100 conversations, the order of each two pairs balanced, the first pairs not counted; the heap collected between slices as often as the runtime would, each collection timed and its cost charged to every slice by the bytes it allocated; a round's ratio is the geometric mean of the middle half of its pairs' ratios, the baseline's figure its side's time summed over its slices, ours that times the ratio; background goroutines of one side fall on whichever slice they meet"
	return c.rows([]pair{
		{figure: "7", name: "(a) the loop vs itself (A/A), interleaved", kind: duration, unit: "run",
			ours: aa, base: aa2, goal: info,
			note: "two loops doing the same work: the spread of the interleaved method itself (1.00× is exact); " + how},
		{figure: "7", name: "(a) inspector mounted, one event stream client vs without, interleaved", kind: duration, unit: "run",
			ours: inspOn, base: inspOff, goal: ratioAtMost(1.1),
			note: "the client follows the page's stream; " + how + "; so the view the inspector's stream renders of a side's runs (every 250ms at most) falls on either side's slices, and bytes a side allocates after its slice are counted to the next (see the row in phases)"},
		{figure: "7", name: "(a) inspector mounted, one event stream client vs without, in phases, per CPU second", kind: duration, unit: "run (CPU)",
			ours: phasesOn, base: phasesOff, goal: ratioAtMost(1.1),
			note: fmt.Sprintf("the client follows the page's stream; one run per round, the sides in phases of %v each, their order balanced two pairs at a time, the first pair not counted; every phase starts from a collected heap and the collector runs in it as the runtime would; an inspected phase ends once the stream has shown its last run to the client (the view rendered, sent and read), so that what the inspector does for a phase's runs is the phase's; time is the process's CPU time (the wait for the stream is idle wall time); a round's ratio is the geometric mean of the middle half of its pairs' ratios", c.abTime(phasesRound)/phasesOf)},
		{figure: "7", name: "(a) the loop vs itself (A/A), in phases", kind: duration, unit: "run (CPU)",
			ours: phasesAA, base: phasesAA2, goal: info,
			note: "two loops doing the same work, measured as the inspector's row in phases is (without a stream to wait for): the spread of that method itself (1.00× is exact)"},
		{figure: "7", name: "(a) the inspected loop vs itself (A/A), in phases", kind: duration, unit: "run (CPU)",
			ours: inspAA, base: inspAA2, goal: info,
			note: "the inspector mounted and followed on both sides, each its own, each phase ended once its stream showed its last run, as the inspector's row in phases: the spread of that method with the inspector's own work on both sides (1.00× is exact)"},
		{figure: "7", name: "(a) through agent.Run vs through the raw loop, interleaved", kind: throughput, unit: "runs",
			ours: agentOn, base: agentOff, goal: ratioAtLeast(1),
			note: "the raw loop played by hand as a host would (runByHand); " + how},
	})
}
