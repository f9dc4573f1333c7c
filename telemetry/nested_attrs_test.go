package telemetry

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/messages"
)

// An agent run by another agent's tool call starts its run span after
// the calling tool's span, which may be started only then: the nested
// run keeps its own attributes, not the tool call's.
func TestTraced_NestedRunKeepsItsAttributes(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := New(&Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	outer := &agentObserver{t: tel, name: "outer"}
	inner := &agentObserver{t: tel, name: "inner"}
	rec := func(kind eventKind, h handler, f *messages.Frame, actor string) {
		ev := frameEvent(kind, h, f)
		ev.actor = actor
		tel.rec.record(&ev)
	}
	rec(evIn, outer, messages.RawParam("s1", "messages", json.RawMessage(`[]`)), "root/outer")
	rec(evOut, outer, messages.ToolCall("s1", "call_1", "inner", json.RawMessage(`{}`)), "")
	rec(evIn, inner, messages.RawParam("s2", "messages", json.RawMessage(`[]`)), "root/outer/inner")
	rec(evOut, inner, messages.End("s2"), "")
	rec(evOut, outer, messages.RawToolResult("s1", "call_1", "inner", []byte(`2`)), "")
	rec(evOut, outer, messages.End("s1"), "")
	spans := exp.GetSpans()
	found := false
	for _, s := range spans {
		a := spanAttrs(s)
		t.Logf("%-22s %v", s.Name, a)
		if s.Name == "invoke_agent inner" {
			found = true
			if a["gen_ai.operation.name"] != "invoke_agent" || a["gen_ai.agent.name"] != "inner" || a["gen_ai.conversation.id"] != "s2" {
				t.Errorf("nested run span has attributes %v", a)
			}
		}
	}
	if !found {
		t.Fatalf("no span named %q among %d", "invoke_agent inner", len(spans))
	}
	// The nested run is a child of the outer agent's tool call.
	var tool, run tracetest.SpanStub
	for _, s := range spans {
		switch {
		case s.Name == "invoke_agent inner":
			run = s
		case spanAttrs(s)["gen_ai.operation.name"] == "execute_tool":
			tool = s
		}
	}
	if run.Parent.SpanID() != tool.SpanContext.SpanID() || !tool.SpanContext.IsValid() {
		t.Errorf("nested run's parent %v, want the tool call's span %v", run.Parent.SpanID(), tool.SpanContext.SpanID())
	}
}

func spanAttrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}
