package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// Many sessions at once through the raw loop (no agent API): n tool loops
// on one runtime, each with its own scripted model and Conn, playing the
// figure 7 conversation at the same time (each driven by a goroutine of
// its own, runs of one session back to back, see fleetDrivers), against
// one conversation at a time; and the latency of one run under that load.

// conversationRequest is the conversation's first request, encoded.
var conversationRequest = models.EncodeMessages(conversationAsk)

// sessionFleet is n loop sessions on one runtime.
type sessionFleet struct {
	rt      *actors.Runtime
	conns   []*actors.Conn
	drivers *fleetDrivers
}

func newSessionFleet(n int) (*sessionFleet, error) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		return nil, err
	}
	f := &sessionFleet{rt: rt}
	f.drivers = newFleetDrivers(n, true, f.run) // no goroutine until the first drive
	noops := noopTools(true)
	// One compiled script, a Model of its own (its own turn sequence) for
	// each session: a host's sessions share their model's configuration.
	script, err := scripted.New(conversationScript(), &scripted.Options{MaxRecorded: -1})
	if err != nil {
		f.Close()
		return nil, err
	}
	for range n {
		model := script.Fork()
		loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Tools: noops},
			MaxIterations: 10,
		})
		if err != nil {
			f.Close()
			return nil, err
		}
		conn, err := rt.Start(loop)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.conns = append(f.conns, conn)
	}
	return f, nil
}

func (f *sessionFleet) Close() error {
	f.drivers.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return f.rt.Close(ctx)
}

// run plays one conversation on session i and checks it.
func (f *sessionFleet) run(ctx context.Context, i, run int) (time.Duration, error) {
	start := time.Now()
	id := "run-" + strconv.Itoa(run)
	conn := f.conns[i]
	if err := conn.SendAll(messages.RawParam(id, models.ParamMessages, conversationRequest), messages.End(id)); err != nil {
		return 0, err
	}
	frames, err := conn.RecvStream(ctx, id)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, checkConversation(frames)
}

// checkConversation checks the frames of one run of the conversation.
func checkConversation(frames []*messages.Frame) error {
	results, text := 0, ""
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			if f.IsErrorResult() {
				return fmt.Errorf("tool %s failed: %s", f.GetName(), f.GetPayload())
			}
			results++
		case messages.FrameType_TEXT:
			text += f.GetText()
		case messages.FrameType_ERROR:
			return fmt.Errorf("conversation failed: %s", f.GetText())
		}
	}
	if results != len(conversationTools) || text != finalText {
		return fmt.Errorf("conversation strayed: %d results, text %q", results, text)
	}
	return nil
}

// fleetDrivers plays runs on n sessions at once, each session driven by
// a goroutine of its own that lives as long as the fleet and plays its
// session's runs back to back, as a host's session goroutine serves its
// own session without waiting for the others. (Until 2026-12-04 the
// drivers played one run each and waited for all n before any started
// again: every round ended with a tail of a few runs in flight and a
// processor idle, 4 % of a round's time in a trace, and each run cost
// its driver and the benchmark's goroutine a park and a wake-up each,
// which the one-at-a-time side, playing its runs back to back on the
// benchmark's goroutine, does not pay.) One session is played on the
// caller's goroutine.
type fleetDrivers struct {
	play  func(ctx context.Context, i, run int) (time.Duration, error)
	runs  []int             // runs played on session i, its driver's only
	took  [][]time.Duration // durations of session i's runs since the last reset; nil if not timed
	start []chan fleetBatch // nil until the first batch of n > 1
	done  chan error        // one per driver per batch
}

// fleetBatch is one batch of runs: every driver plays runs of its own
// session with ctx.
type fleetBatch struct {
	ctx  context.Context
	runs int
}

// newFleetDrivers returns the drivers of n sessions, which play a run
// with play; when timed, they keep the durations play returns (for p99).
func newFleetDrivers(n int, timed bool, play func(ctx context.Context, i, run int) (time.Duration, error)) *fleetDrivers {
	d := &fleetDrivers{play: play, runs: make([]int, n)}
	if timed {
		d.took = make([][]time.Duration, n)
	}
	return d
}

// drive plays runs conversations on every session, all sessions at
// once, and returns the first error.
func (d *fleetDrivers) drive(ctx context.Context, runs int) error {
	n := len(d.runs)
	if n == 1 {
		return d.playRuns(ctx, 0, runs)
	}
	if d.start == nil {
		d.start = make([]chan fleetBatch, n)
		d.done = make(chan error, n)
		for i := range n {
			d.start[i] = make(chan fleetBatch, 1)
			go func() {
				for b := range d.start[i] {
					d.done <- d.playRuns(b.ctx, i, b.runs)
				}
			}()
		}
	}
	for _, s := range d.start {
		s <- fleetBatch{ctx: ctx, runs: runs}
	}
	var first error
	for range n {
		if err := <-d.done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// playRuns plays runs conversations on session i, one after the other.
func (d *fleetDrivers) playRuns(ctx context.Context, i, runs int) error {
	if d.took != nil {
		d.took[i] = slices.Grow(d.took[i], runs)
	}
	for range runs {
		d.runs[i]++
		took, err := d.play(ctx, i, d.runs[i])
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		if d.took != nil {
			d.took[i] = append(d.took[i], took)
		}
	}
	return nil
}

// close stops the drivers; a batch must not be running.
func (d *fleetDrivers) close() {
	for _, s := range d.start {
		close(s)
	}
	d.start = nil
}

// resetLatencies forgets the durations of the runs so far.
func (d *fleetDrivers) resetLatencies() {
	for i := range d.took {
		d.took[i] = d.took[i][:0]
	}
}

// p99 is the 99th percentile of the durations of the runs since the last
// reset.
func (d *fleetDrivers) p99() time.Duration {
	var s []time.Duration
	for _, t := range d.took {
		s = append(s, t...)
	}
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// benchSessionFleet measures n sessions playing at the same time, b.N
// conversations each: runs/s over all sessions, runs per CPU second,
// and the p99 latency of one run ("p99-runs/s" is its inverse, so that
// metricSide reads it as a time per run).
func benchSessionFleet(b *testing.B, n int) {
	f, err := newSessionFleet(n)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	// Warm up (grow what grows), then b.N runs on every session.
	if err := f.drivers.drive(ctx, max(1, 1000/n)); err != nil {
		b.Fatal(err)
	}
	f.drivers.resetLatencies()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	if err := f.drivers.drive(ctx, b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportRuns(b, b.N*n, processCPU()-cpu)
	if p := f.drivers.p99(); p > 0 {
		b.ReportMetric(1/p.Seconds(), "p99-runs/s")
	}
}

// sessionRows are the rows of many raw-loop sessions at once.
func sessionRows(c *config, n int) []pair {
	many := func(b *testing.B) { benchSessionFleet(b, n) }
	one := func(b *testing.B) { benchSessionFleet(b, 1) }
	name := fmt.Sprintf("%d concurrent conversations on one runtime (raw loop) vs one at a time", n)
	return []pair{
		{figure: "7", name: name,
			ours: metricSide(fmt.Sprintf("%d sessions", n), "runs/s", many),
			base: metricSide("one at a time", "runs/s", one), kind: throughput, unit: "runs", goal: ratioAtLeast(1.5),
			note: "every session its own loop, scripted model (forked from one compiled script) and Conn on one runtime, driven by a goroutine of its own playing its runs back to back; runs/s over all sessions"},
		{figure: "7", name: name + ", per CPU second",
			ours: metricSide(fmt.Sprintf("%d sessions", n), "runs/cpu-s", many),
			base: metricSide("one at a time", "runs/cpu-s", one), kind: throughput, unit: "runs per CPU", goal: info,
			note: "runs per second of the process's CPU time"},
		{figure: "7", name: fmt.Sprintf("p99 latency of one run, %d concurrent conversations vs one at a time", n),
			ours: metricSide(fmt.Sprintf("%d sessions", n), "p99-runs/s", many),
			base: metricSide("one at a time", "p99-runs/s", one), kind: duration, unit: "run", goal: info,
			note: "the 99th percentile of one run's time from its PARAM to its END, over the round's runs"},
	}
}
