package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// Figure 7 through the agent API, and many agents in one runtime: the
// conversation of figure 7 played with agent.Run (the answer folded into
// a models.Answer) instead of frames on a raw loop Conn, by one agent and
// by many agents at once (each with its own scripted model, runs of one
// agent one after the other).

var conversationAsk = []models.Message{models.UserMessage(userPrompt)}

// agentFleet is n agents on one runtime.
type agentFleet struct {
	rt      *actors.Runtime
	agents  []*agent.Agent
	drivers *fleetDrivers
}

func newAgentFleet(n int, sync bool) (*agentFleet, error) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		return nil, err
	}
	f := &agentFleet{rt: rt}
	f.drivers = newFleetDrivers(n, false, func(ctx context.Context, i, run int) (time.Duration, error) {
		return 0, f.run(ctx, i, run)
	}) // no goroutine until the first drive
	noops := noopTools(sync)
	// One compiled script, a Model of its own (its own turn sequence) for
	// each session: a host's sessions share their model's configuration.
	script, err := scripted.New(conversationScript(), &scripted.Options{MaxRecorded: -1})
	if err != nil {
		f.Close()
		return nil, err
	}
	for range n {
		model := script.Fork()
		a, err := agent.New(rt, model.Spec("model"), &agent.Options{Tools: noops, MaxIterations: 10})
		if err != nil {
			f.Close()
			return nil, err
		}
		f.agents = append(f.agents, a)
	}
	return f, nil
}

func (f *agentFleet) Close() error {
	f.drivers.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return f.rt.Close(ctx)
}

// run plays one conversation on agent i and checks it.
func (f *agentFleet) run(ctx context.Context, i, run int) error {
	ans, err := f.agents[i].Run(ctx, "run-"+strconv.Itoa(run), conversationAsk)
	if err != nil {
		return err
	}
	if ans.Text != finalText || ans.ToolCalls() != len(conversationTools) || ans.FailedCalls() != 0 {
		return fmt.Errorf("conversation strayed: %d calls (%d failed), text %q", ans.ToolCalls(), ans.FailedCalls(), ans.Text)
	}
	return nil
}

// benchAgentConversation measures runs of one agent.
func benchAgentConversation(b *testing.B, sync bool) {
	f, err := newAgentFleet(1, sync)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if err := f.run(ctx, 0, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := range b.N {
		if err := f.run(ctx, 0, i+1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRuns(b, b.N, processCPU()-cpu)
}

// runByHand plays one conversation on the raw loop as a host without the
// agent API would: the conversation encoded for the run, PARAM and END
// sent on the loop's Conn, and the frames folded into a models.Answer
// until END, checked as the agent's runs are.
func (lc *loopConversation) runByHand(ctx context.Context) error {
	lc.runs++
	id := "run-" + strconv.Itoa(lc.runs)
	request := models.EncodeMessages(conversationAsk)
	if err := lc.conn.SendAll(messages.RawParam(id, models.ParamMessages, request), messages.End(id)); err != nil {
		return err
	}
	ans := models.NewAnswer(id)
	for !ans.Ended {
		f, err := lc.conn.Recv(ctx)
		if err != nil {
			return err
		}
		ans.Add(f)
	}
	if ans.Text != finalText || ans.ToolCalls() != len(conversationTools) || ans.FailedCalls() != 0 {
		return fmt.Errorf("conversation strayed: %d calls (%d failed), text %q", ans.ToolCalls(), ans.FailedCalls(), ans.Text)
	}
	return nil
}

// benchLoopByHand measures runs of the raw loop played by hand
// (runByHand), tools Sync.
func benchLoopByHand(b *testing.B) {
	lc, err := newLoopConversation(true)
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	ctx := context.Background()
	if err := lc.runByHand(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for range b.N {
		if err := lc.runByHand(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRuns(b, b.N, processCPU()-cpu)
}

// reportRuns reports runs/s, and runs per second of the process's CPU
// time (what a run costs, whatever share of the machine the process got).
func reportRuns(b *testing.B, runs int, cpu time.Duration) {
	b.ReportMetric(float64(runs)/b.Elapsed().Seconds(), "runs/s")
	if cpu > 0 {
		b.ReportMetric(float64(runs)/cpu.Seconds(), "runs/cpu-s")
	}
}

// benchAgentFleet measures n agents playing at the same time, b.N
// conversations each (see fleetDrivers); the metric is runs/s over all
// agents.
func benchAgentFleet(b *testing.B, n int) {
	f, err := newAgentFleet(n, true)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if err := f.drivers.drive(ctx, 1); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	if err := f.drivers.drive(ctx, b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportRuns(b, b.N*n, processCPU()-cpu)
}

// agentMemory starts n agents, plays the conversation once on each, and
// returns the heap growth per idle agent in KiB.
func agentMemory(n int) (float64, error) {
	before := heapAfterGC()
	f, err := newAgentFleet(n, true)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.drivers.drive(context.Background(), 1); err != nil {
		return 0, err
	}
	after := heapAfterGC()
	runtime.KeepAlive(f)
	return float64(int64(after)-int64(before)) / float64(n) / 1024, nil
}

// figureAgents is figure 7 through the agent API and many agents at once.
func figureAgents(c *config) []Row {
	n := 1000
	switch {
	case c.smoke:
		n = 20
	case c.quick:
		n = 500
	}
	single := metricSide("one agent", "runs/s", func(b *testing.B) { benchAgentConversation(b, true) })
	fleet := func(b *testing.B) { benchAgentFleet(b, n) }
	rows := c.rows(append([]pair{
		{figure: "7", name: "(a) through agent.Run vs through the raw loop", ours: single,
			base: benchSide("raw loop", benchLoopByHand),
			kind: throughput, unit: "runs", goal: info,
			note: "same conversation, sync tools; the raw loop played by hand as a host would: the messages encoded for each run, the frames folded into a models.Answer; agent.Run adds its Mux stream and session bookkeeping; each side measured for a whole round, one after the other (the interleaved row carries the goal)"},
		{figure: "7", name: "(a) through agent.Run vs through the raw loop, per CPU second", ours: metricSide("one agent", "runs/cpu-s", func(b *testing.B) { benchAgentConversation(b, true) }),
			base: metricSide("raw loop", "runs/cpu-s", benchLoopByHand),
			kind: throughput, unit: "runs per CPU", goal: info,
			note: "runs per second of the process's CPU time: what a run costs, whatever share of a busy machine the process gets"},
		{figure: "7", name: "(a) through agent.Run vs the raw loop counting frames", ours: single,
			base: benchSide("raw loop, frames counted", func(b *testing.B) { benchLoopConversation(b, true) }),
			kind: throughput, unit: "runs", goal: info,
			note: "the row's baseline until 2026-12-03: the raw loop sent one request encoded once for all runs and only counted the frames it got back, leaving out the work agent.Run does for its caller (encoding the conversation, folding the answer)"},
		{figure: "7", name: fmt.Sprintf("%d concurrent agents vs one agent", n),
			ours: metricSide(fmt.Sprintf("%d agents", n), "runs/s", fleet),
			base: single, kind: throughput, unit: "runs", goal: ratioAtLeast(1.5),
			note: "every agent with its own scripted model (forked from one compiled script), driven by a goroutine of its own playing its runs back to back; runs/s over all agents"},
		{figure: "7", name: fmt.Sprintf("%d concurrent agents vs one agent, per CPU second", n),
			ours: metricSide(fmt.Sprintf("%d agents", n), "runs/cpu-s", fleet),
			base: metricSide("one agent", "runs/cpu-s", func(b *testing.B) { benchAgentConversation(b, true) }),
			kind: throughput, unit: "runs per CPU", goal: info,
			note: "runs per second of the process's CPU time: what a run costs, whatever share of a busy machine the process gets"},
	}, sessionRows(c, n)...))
	measure := side{name: "polyweave", measure: func() sample {
		kib, err := agentMemory(n)
		return sample{ns: kib, err: err}
	}}
	c2 := *c
	c2.rounds = min(c.rounds, 3)
	return append(rows, c2.rows([]pair{{figure: "7", name: fmt.Sprintf("memory per idle agent (%d agents, each answered once)", n),
		ours: measure, kind: memory, unit: "KiB/agent", goal: oursAtMost(64, "≤ 64 KiB")}})...)
}
