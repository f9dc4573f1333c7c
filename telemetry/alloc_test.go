package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// nullContext is an actors.Context that does nothing and allocates
// nothing.
type nullContext struct{ self actors.Ref }

func (nullContext) Emit(*messages.Frame)                                {}
func (nullContext) Send(actors.Ref, *messages.Frame)                    {}
func (nullContext) Spawn(actors.Spec) (actors.Ref, error)               { return actors.Ref{}, nil }
func (nullContext) Stop(actors.Ref)                                     {}
func (nullContext) After(time.Duration, any) func() bool                { return nil }
func (nullContext) Fail(error)                                          {}
func (c nullContext) Self() actors.Ref                                  { return c.self }
func (nullContext) Logger() *slog.Logger                                { return nil }
func (nullContext) Go(any, func(context.Context, func(any)) any) func() { return nil }

// runFrames is one run as an agent sees it: the request in, the frames it
// answers with (two tool rounds, usage, finish, text, END) out.
func runFrames() (in, out []*messages.Frame) {
	in = []*messages.Frame{messages.RawParam("s1", "messages", json.RawMessage(`[]`)), messages.End("s1")}
	out = []*messages.Frame{
		messages.ToolCall("s1", "call_1", "add", json.RawMessage(`{"a":1}`)),
		messages.RawToolResult("s1", "call_1", "add", []byte(`2`)),
		messages.Meta("s1", "usage", json.RawMessage(`{"prompt_tokens":1,"completion_tokens":1}`)),
		messages.Meta("s1", "finish", json.RawMessage(`"stop"`)),
		messages.Text("s1", "done"),
		messages.End("s1"),
	}
	return in, out
}

// echoLogic emits out when it gets the END of the request.
type echoLogic struct{ out []*messages.Frame }

func (l echoLogic) Receive(c actors.Context, msg any) {
	if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_END {
		for _, o := range l.out {
			c.Emit(o)
		}
	}
}

// TestTracingOff_NoAllocation: with tracing (and metrics) off, a tapped
// agent and a tapped model adapter allocate nothing more per run than
// the bare Logic (Agent and Model do not even tap then; this holds if
// something is tapped anyway).
func TestTracingOff_NoAllocation(t *testing.T) {
	tel, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	in, out := runFrames()
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	bare := echoLogic{out: out}
	spec := actors.Spec{Name: "x", New: func() actors.Logic { return bare }}
	for _, tc := range []struct {
		name  string
		logic actors.Logic
	}{
		{"agent", tap(spec, func() observer { return &agentObserver{t: tel} }).New()},
		{"model", tap(spec, func() observer { return &modelObserver{t: tel, provider: "p"} }).New()},
	} {
		run := func(l actors.Logic) func() {
			return func() {
				for _, f := range in {
					l.Receive(c, f)
				}
			}
		}
		base := testing.AllocsPerRun(200, run(bare))
		tapped := testing.AllocsPerRun(200, run(tc.logic))
		if tapped != base {
			t.Errorf("%s: %v allocations per run tapped, %v bare", tc.name, tapped, base)
		}
	}
	if _, tapped := tel.Agent(spec).New().(*tapLogic); tapped {
		t.Error("Agent tapped with telemetry off")
	}
	if _, tapped := tel.Model(spec, "p").New().(*tapLogic); tapped {
		t.Error("Model tapped with telemetry off")
	}
}

// nullTracerProvider records nothing and allocates nothing, but is not
// a no-op provider: a Telemetry given it traces, and the allocations of
// a traced run are then the taps' and the recorder's own.
type nullTracerProvider struct{ embedded.TracerProvider }

func (nullTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return nullTracer{} }

type nullTracer struct{ embedded.Tracer }

func (nullTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	return ctx, trace.SpanFromContext(ctx)
}

// TestTraced_RecordingAllocatesOnlyTheOptions: recording the events of a
// traced run (the run, 4 model requests, 3 tool calls: 8 spans) allocates
// nothing of its own but the span options a tracer must be given (a start
// timestamp, the attributes and an end timestamp a span): no record, span
// name, option slice or map entry per run.
func TestTraced_RecordingAllocatesOnlyTheOptions(t *testing.T) {
	tel, err := New(&Options{TracerProvider: nullTracerProvider{}})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if !tel.Tracing() {
		t.Fatal("tracing off with a tracer provider")
	}
	agent := &agentObserver{t: tel, name: "agent"}
	model := &modelObserver{t: tel, provider: "p"}
	var evs []event
	add := func(kind eventKind, h handler, f *messages.Frame, actor string) {
		ev := frameEvent(kind, h, f)
		ev.actor = actor
		evs = append(evs, ev)
	}
	add(evIn, agent, messages.RawParam("s1", "messages", json.RawMessage(`[]`)), "agent")
	for i := range 4 {
		add(evIn, model, messages.RawParam("s1", models.ParamModel, json.RawMessage(`"gpt"`)), "agent/model")
		add(evIn, model, messages.End("s1"), "agent/model")
		add(evOut, model, messages.Meta("s1", models.MetaFinish, json.RawMessage(`"tool_calls"`)), "")
		add(evOut, model, messages.End("s1"), "")
		if i < 3 {
			add(evOut, agent, messages.ToolCall("s1", "call_1", "add", json.RawMessage(`{}`)), "")
			add(evOut, agent, messages.RawToolResult("s1", "call_1", "add", []byte(`2`)), "")
		}
	}
	add(evOut, agent, messages.End("s1"), "")
	spans := 0
	for _, ev := range evs {
		if ev.kind == evOut && ev.ftype == messages.FrameType_END || ev.ftype == messages.FrameType_TOOL_RESULT {
			spans++
		}
	}
	if spans != 8 {
		t.Fatalf("the run has %d spans, want 8", spans)
	}
	// Events are recorded on the test's goroutine, as the recorder's
	// goroutine would (it has nothing queued).
	allocs := testing.AllocsPerRun(100, func() {
		for i := range evs {
			tel.rec.record(&evs[i])
		}
	})
	if len(tel.runs) != 0 || len(tel.active) != 0 || len(agent.runs) != 0 || len(model.open) != 0 {
		t.Fatalf("state kept after the run: runs %v, active %v, agent %v, model %v", tel.runs, tel.active, agent.runs, model.open)
	}
	const options = 8 * 3 // trace.WithTimestamp twice and trace.WithAttributes once a span (each boxes its value)
	if allocs > options {
		t.Errorf("recording a traced run allocates %v times, want at most %d (the span options)", allocs, options)
	}
}
