package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
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
