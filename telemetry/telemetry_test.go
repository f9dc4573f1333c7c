package telemetry_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// TestTrace_RunIsOneTrace: two tool rounds, the second tool panics; the
// run is one trace: invoke_agent at the root, three chat spans and two
// execute_tool spans under it, the panicked call with error.type panic.
func TestTrace_RunIsOneTrace(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":1}`}}, Usage: &scripted.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		{ToolCalls: []scripted.ToolCall{{ID: "call_2", Name: "boom", Arguments: `{"a":2}`}}},
		{Text: "done"},
	}}, nil)
	type in struct {
		A int `json:"a"`
	}
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds"}, func(_ context.Context, in in) (int, error) { return in.A + 1, nil })
	boom := tools.MustNewTyped(tools.Definition{Name: "boom", Description: "Panics"}, func(_ context.Context, in in) (int, error) { panic("injected") })
	loop, err := tools.NewLoop(tel.Model(model.Spec("model"), "scripted"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{add, boom}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := modeltest.Runtime(t).Start(tel.Agent(loop))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.RawParam("s1", "messages", json.RawMessage(`[{"role":"user","content":"go"}]`)), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := conn.RecvStream(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	var root tracetest.SpanStub
	count := map[string]int{}
	for _, s := range spans {
		if s.Name == "invoke_agent agent" {
			root = s
		}
	}
	if !root.SpanContext.IsValid() {
		t.Fatalf("no run span in %d spans", len(spans))
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("span %s is in another trace", s.Name)
		}
		if s.Name != root.Name && s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("span %s is not a child of the run", s.Name)
		}
		count[s.Name]++
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		switch s.Name {
		case "execute_tool boom":
			if attrs["error.type"] != "panic" || attrs["polyweave.tool.outcome"] != "error" || attrs["gen_ai.tool.call.id"] != "call_2" {
				t.Errorf("panicked call's span attributes %v", attrs)
			}
		case "execute_tool add":
			if attrs["polyweave.tool.outcome"] != "ok" {
				t.Errorf("add span attributes %v", attrs)
			}
		}
	}
	if count["chat"] != 3 || count["execute_tool add"] != 1 || count["execute_tool boom"] != 1 || count["invoke_agent agent"] != 1 {
		t.Fatalf("spans %v", count)
	}
}
