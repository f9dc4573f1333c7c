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
// its own, runs of one session one after the other), against one
// conversation at a time; and the latency of one run under that load.

// conversationRequest is the conversation's first request, encoded.
var conversationRequest = models.EncodeMessages(conversationAsk)

// sessionFleet is n loop sessions on one runtime.
type sessionFleet struct {
	rt      *actors.Runtime
	conns   []*actors.Conn
	runs    int
	drivers []chan int
	done    chan sessionRun
	// latencies are the durations of the runs since the last reset.
	latencies []time.Duration
}

// sessionRun is what a driver reports of one run.
type sessionRun struct {
	took time.Duration
	err  error
}

func newSessionFleet(n int) (*sessionFleet, error) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		return nil, err
	}
	f := &sessionFleet{rt: rt}
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
	for _, d := range f.drivers {
		close(d)
	}
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

// runAll plays one conversation on every session at once, each session
// driven by a goroutine of its own that lives as long as the fleet; one
// session is played on the caller's goroutine.
func (f *sessionFleet) runAll(ctx context.Context) error {
	f.runs++
	if len(f.conns) == 1 {
		took, err := f.run(ctx, 0, f.runs)
		f.latencies = append(f.latencies, took)
		return err
	}
	if f.drivers == nil {
		f.drivers = make([]chan int, len(f.conns))
		f.done = make(chan sessionRun, len(f.conns))
		for i := range f.conns {
			f.drivers[i] = make(chan int, 1)
			go func() {
				for run := range f.drivers[i] {
					took, err := f.run(ctx, i, run)
					if err != nil {
						err = fmt.Errorf("session %d: %w", i, err)
					}
					f.done <- sessionRun{took: took, err: err}
				}
			}()
		}
	}
	for _, d := range f.drivers {
		d <- f.runs
	}
	var first error
	for range f.drivers {
		r := <-f.done
		if r.err != nil && first == nil {
			first = r.err
		}
		f.latencies = append(f.latencies, r.took)
	}
	return first
}

// p99 is the 99th percentile of the latencies.
func (f *sessionFleet) p99() time.Duration {
	if len(f.latencies) == 0 {
		return 0
	}
	s := slices.Clone(f.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// benchSessionFleet measures n sessions each playing one conversation at
// the same time, per b.N: runs/s over all sessions, runs per CPU second,
// and the p99 latency of one run ("p99-runs/s" is its inverse, so that
// metricSide reads it as a time per run).
func benchSessionFleet(b *testing.B, n int) {
	f, err := newSessionFleet(n)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	for range max(1, 1000/n) { // warm up: grow what grows
		if err := f.runAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	f.latencies = f.latencies[:0]
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		if err := f.runAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRuns(b, b.N*n, processCPU()-cpu)
	if p := f.p99(); p > 0 {
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
			note: "every session its own loop, scripted model (forked from one compiled script) and Conn on one runtime, driven by a goroutine of its own; runs/s over all sessions"},
		{figure: "7", name: name + ", per CPU second",
			ours: metricSide(fmt.Sprintf("%d sessions", n), "runs/cpu-s", many),
			base: metricSide("one at a time", "runs/cpu-s", one), kind: throughput, unit: "runs per CPU", goal: info,
			note: "runs per second of the process's CPU time"},
		{figure: "7", name: fmt.Sprintf("p99 latency of one run, %d concurrent conversations vs one at a time", n),
			ours: metricSide(fmt.Sprintf("%d sessions", n), "p99-runs/s", many),
			base: metricSide("one at a time", "p99-runs/s", one), kind: duration, unit: "run", goal: info,
			note: "the 99th percentile of one run's time from its PARAM to its END, over the rounds' runs"},
	}
}
