package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// TestQueueFull_AbandonsOnlyTheRunsThatLostEvents: two runs are open, in
// two agents with a model adapter each, and in one agent on two streams;
// events are dropped for one stream only. Once the recorder has caught up,
// only that stream's run and request end incomplete; the other runs (one
// in the same agent) go on and end normally, with all their attributes.
func TestQueueFull_AbandonsOnlyTheRunsThatLostEvents(t *testing.T) {
	const maxQueued = 8
	exp := tracetest.NewInMemoryExporter()
	tel, stall := stalledTelemetry(t, Options{MaxQueued: maxQueued}, exp, false)
	ctx := context.Background()

	aCtx := nullContext{self: actors.RefOf(actor.NewPID("test", "a"))}
	amCtx := nullContext{self: actors.RefOf(actor.NewPID("test", "a/model"))}
	bCtx := nullContext{self: actors.RefOf(actor.NewPID("test", "b"))}
	bmCtx := nullContext{self: actors.RefOf(actor.NewPID("test", "b/model"))}
	agentA, modelA := &agentObserver{t: tel, name: "a"}, &modelObserver{t: tel, provider: "p"}
	agentB, modelB := &agentObserver{t: tel, name: "b"}, &modelObserver{t: tel, provider: "p"}
	call := func(agent *agentObserver, stream, id string) {
		agent.out(messages.ToolCall(stream, id, "add", json.RawMessage(`{}`)))
		agent.out(messages.RawToolResult(stream, id, "add", []byte(`2`)))
	}
	request := func(c nullContext, model *modelObserver, stream string) {
		model.in(c, messages.RawParam(stream, models.ParamModel, json.RawMessage(`"m"`)))
		model.in(c, messages.End(stream))
	}

	// Three runs start and each sends a request: "lossy" in agent a,
	// "kept" in agent b, "sibling" in agent a too. A first tool call of
	// lossy's ends in the stalled processor.
	agentA.in(aCtx, messages.RawParam("lossy", "messages", json.RawMessage(`[]`)))
	agentB.in(bCtx, messages.RawParam("kept", "messages", json.RawMessage(`[]`)))
	agentA.in(aCtx, messages.RawParam("sibling", "messages", json.RawMessage(`[]`)))
	if err := tel.Flush(ctx); err != nil { // the queue holds 8 events
		t.Fatal(err)
	}
	request(amCtx, modelA, "lossy")
	request(bmCtx, modelB, "kept")
	request(amCtx, modelA, "sibling")
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	call(agentA, "lossy", "l0")
	release := stall.stallNext()
	if n, _ := queued(tel); n != 0 {
		t.Fatalf("%d events queued behind the stalled one", n)
	}

	// The queue fills with kept's and sibling's answers and tool calls;
	// lossy's answer and tool calls find it full.
	modelB.out(messages.Meta("kept", models.MetaUsage, json.RawMessage(`{"prompt_tokens":3,"completion_tokens":4}`)))
	modelB.out(messages.End("kept"))
	call(agentB, "kept", "k1")
	modelA.out(messages.Meta("sibling", models.MetaUsage, json.RawMessage(`{"prompt_tokens":5,"completion_tokens":6}`)))
	modelA.out(messages.End("sibling"))
	call(agentA, "sibling", "s1")
	if d := tel.Dropped(); d != 0 {
		t.Fatalf("Dropped() = %d before the queue was full", d)
	}
	if n, _ := queued(tel); n != maxQueued {
		t.Fatalf("%d events queued, want %d", n, maxQueued)
	}
	modelA.out(messages.Meta("lossy", models.MetaUsage, json.RawMessage(`{"prompt_tokens":1,"completion_tokens":1}`)))
	modelA.out(messages.End("lossy"))
	call(agentA, "lossy", "l1")
	catchUp(ctx, t, tel, stall, release, 4)

	// kept and sibling go on after the burst and end normally.
	call(agentB, "kept", "k2")
	agentB.out(messages.End("kept"))
	call(agentA, "sibling", "s2")
	agentA.out(messages.End("sibling"))
	call(agentA, "lossy", "l2") // the abandoned run's: not recorded
	agentA.out(messages.End("lossy"))
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	got := map[string]tracetest.SpanStub{}
	runs := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "invoke_agent a", "invoke_agent b":
			runs[spanAttr(s, "gen_ai.conversation.id")] = s
		case "execute_tool add":
			got[spanAttr(s, "gen_ai.tool.call.id")] = s
		case "chat m":
			got["chat "+spanAttr(s, "gen_ai.usage.input_tokens")] = s
		default:
			t.Errorf("span %q", s.Name)
		}
	}
	for _, conv := range []string{"kept", "sibling"} {
		r, ok := runs[conv]
		if !ok {
			t.Errorf("run %s not ended", conv)
			continue
		}
		if spanAttr(r, string(incompleteKey)) != "" || r.EndTime.Before(r.StartTime) {
			t.Errorf("run %s ended abandoned: %v", conv, r.Attributes)
		}
	}
	if r, ok := runs["lossy"]; !ok || spanAttr(r, string(incompleteKey)) != "true" {
		t.Errorf("run lossy not ended incomplete: %v", r.Attributes)
	}
	for _, id := range []string{"l0", "k1", "k2", "s1", "s2"} {
		s, ok := got[id]
		if !ok {
			t.Errorf("tool call %s not recorded", id)
			continue
		}
		if spanAttr(s, string(incompleteKey)) != "" || spanAttr(s, "polyweave.tool.outcome") != "ok" {
			t.Errorf("tool call %s: %v", id, s.Attributes)
		}
	}
	for _, id := range []string{"l1", "l2"} {
		if _, ok := got[id]; ok {
			t.Errorf("tool call %s of the abandoned run recorded", id)
		}
	}
	for tokens, wantOut := range map[string]string{"3": "4", "5": "6"} {
		s, ok := got["chat "+tokens]
		if !ok {
			t.Errorf("request with %s input tokens not recorded", tokens)
			continue
		}
		if spanAttr(s, string(incompleteKey)) != "" || spanAttr(s, "gen_ai.usage.output_tokens") != wantOut || spanAttr(s, "gen_ai.provider.name") != "p" {
			t.Errorf("request with %s input tokens: %v", tokens, s.Attributes)
		}
	}
	if s, ok := got["chat "]; !ok || spanAttr(s, string(incompleteKey)) != "true" {
		t.Errorf("lossy's request not ended incomplete: %v", s.Attributes)
	}
	if n := len(exp.GetSpans()); n != 3+5+3 {
		t.Errorf("%d spans, want 11", n)
	}
	if len(tel.runs) != 0 || len(tel.active) != 0 {
		t.Errorf("state kept: runs %v, active %v", tel.runs, tel.active)
	}
}

// TestQueueFull_UnknownLossAbandonsAll: a dropped event that belongs to
// no stream (a supervision decision) abandons every open run.
func TestQueueFull_UnknownLossAbandonsAll(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, stall := stalledTelemetry(t, Options{MaxQueued: 2}, exp, false)
	agents := make([]*agentObserver, 2)
	for i := range agents {
		agents[i] = &agentObserver{t: tel, name: fmt.Sprint("a", i)}
		c := nullContext{self: actors.RefOf(actor.NewPID("test", agents[i].name))}
		agents[i].in(c, messages.RawParam(agents[i].name, "messages", json.RawMessage(`[]`)))
		if err := tel.Flush(context.Background()); err != nil { // the queue holds 2 events
			t.Fatal(err)
		}
	}
	agents[0].out(messages.ToolCall("a0", "c0", "add", nil))
	agents[0].out(messages.RawToolResult("a0", "c0", "add", []byte(`2`)))
	release := stall.stallNext()
	agents[0].out(messages.ToolCall("a0", "c1", "add", nil))
	agents[1].out(messages.ToolCall("a1", "c2", "add", nil))
	tel.Supervision(supervisor.Event{Child: "test/a9", Reason: errors.New("boom")})
	catchUp(context.Background(), t, tel, stall, release, 1)
	var runs int
	for _, s := range exp.GetSpans() {
		if s.Name == "invoke_agent a0" || s.Name == "invoke_agent a1" {
			runs++
			if spanAttr(s, string(incompleteKey)) != "true" {
				t.Errorf("%s not ended incomplete", s.Name)
			}
		}
	}
	if runs != 2 || len(tel.runs) != 0 || len(tel.active) != 0 {
		t.Fatalf("%d runs ended, %d open, %d handlers active; want 2, 0, 0", runs, len(tel.runs), len(tel.active))
	}
}

// TestQueueFull_DroppingAllocatesNothing: an event that finds the queue
// full is dropped and its stream remembered without allocating, for
// streams beyond what a burst remembers too.
func TestQueueFull_DroppingAllocatesNothing(t *testing.T) {
	tel, stall := stalledTelemetry(t, Options{MaxQueued: 2}, nil, false)
	agent, release := stallRunEnd(stall, tel, "s")
	agent.out(messages.ToolCall("s", "c0", "add", nil))
	agent.out(messages.ToolCall("s", "c1", "add", nil))
	frames := make([]*messages.Frame, 2*maxLost)
	for i := range frames {
		frames[i] = messages.ToolCall(fmt.Sprint("s", i), "c", "add", nil)
	}
	i := 0
	allocs := testing.AllocsPerRun(len(frames)-1, func() { // and a first run, whose drop starts the warning
		agent.out(frames[i])
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per dropped event, want 0", allocs)
	}
	if d := tel.Dropped(); d != uint64(len(frames)) {
		t.Errorf("Dropped() = %d, want %d", d, len(frames))
	}
	stall.stalling.Store(false)
	close(release)
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestAbandonStream_MetricsOnly: with metrics only, abandoning a stream
// forgets its tool calls and no other stream's, even one whose id starts
// with it.
func TestAbandonStream_MetricsOnly(t *testing.T) {
	o := &agentObserver{untraced: map[string]toolSpan{
		"s1\x00c1": {name: "x"}, "s1\x00c2": {name: "x"}, "s10\x00c1": {name: "y"}, "s2\x00s1": {name: "z"},
	}}
	o.abandonStream("s1", true, time.Now())
	if len(o.untraced) != 2 || o.untraced["s10\x00c1"].name != "y" || o.untraced["s2\x00s1"].name != "z" {
		t.Fatalf("after abandoning s1: %v", o.untraced)
	}
}

// TestReused_ForgottenWithTheirCalls: the calls a resumed session says
// it answers from the store are state the tap keeps (the observer is not
// idle) until their TOOL_CALL frames, also those of a stream with no run
// open, or until their stream is abandoned, which forgets no other
// stream's.
func TestReused_ForgottenWithTheirCalls(t *testing.T) {
	o := &agentObserver{t: &Telemetry{tracing: true}}
	session := func(stream string, ids ...string) {
		payload, err := json.Marshal(map[string][]string{"reused": ids})
		if err != nil {
			t.Fatal(err)
		}
		o.handle(&event{kind: evOut, ftype: messages.FrameType_META, stream: stream, name: tools.MetaSession, payload: payload, at: time.Now()})
	}
	session("s1", "c1", "c2")
	session("s10", "c1")
	if o.idle() {
		t.Fatal("idle while it keeps reused calls")
	}
	// No run is open on s1 (its request was dropped): the call is forgotten all the same.
	o.handle(&event{kind: evOut, ftype: messages.FrameType_TOOL_CALL, stream: "s1", callID: "c1", name: "x", at: time.Now()})
	if o.reused["s1\x00c1"] {
		t.Fatalf("reused call kept after its TOOL_CALL: %v", o.reused)
	}
	o.abandonStream("s1", false, time.Now())
	if len(o.reused) != 1 || !o.reused["s10\x00c1"] {
		t.Fatalf("after abandoning s1: %v, want only s10's call", o.reused)
	}
	o.abandonStream("s10", false, time.Now())
	if !o.idle() {
		t.Fatalf("not idle once every stream was abandoned: %v", o.reused)
	}
}
