package telemetry

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// TestModel_ResilienceAndTruncationEvents: a retry and a wait in line
// reported by a resilience transport (META model_call) and a call cut off
// by the length limit become events of the request's chat span, with the
// model, usage and finish reason as attributes.
func TestModel_ResilienceAndTruncationEvents(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := New(&Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	retry, _ := json.Marshal(resilience.Event{Kind: "retry", Attempt: 1, Status: 429, Delay: 500})
	queued, _ := json.Marshal(resilience.Event{Kind: "queued", Wait: 1000, InFlight: 4})
	out := []*messages.Frame{
		messages.Meta("s1", resilience.MetaEvent, queued),
		messages.Meta("s1", resilience.MetaEvent, retry),
		models.TruncatedCallFrame("s1", "call_9", "write_file", 0, 4096),
		messages.Meta("s1", models.MetaUsage, json.RawMessage(`{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":5}}`)),
		messages.Meta("s1", models.MetaFinish, json.RawMessage(`"length"`)),
		messages.End("s1"),
	}
	spec := actors.Spec{Name: "model", New: func() actors.Logic { return echoLogic{out: out} }}
	l := tel.Model(spec, "openai").New()
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "model"))}
	l.Receive(c, messages.RawParam("s1", models.ParamModel, json.RawMessage(`"gpt-4o-mini"`)))
	l.Receive(c, messages.End("s1"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "chat gpt-4o-mini" {
		t.Fatalf("spans %v", spans)
	}
	s := spans[0]
	a := map[string]string{}
	for _, kv := range s.Attributes {
		a[string(kv.Key)] = kv.Value.String()
	}
	if a["gen_ai.provider.name"] != "openai" || a["gen_ai.usage.input_tokens"] != "7" || a["gen_ai.usage.output_tokens"] != "3" ||
		a["gen_ai.usage.cache_read.input_tokens"] != "5" || a["gen_ai.response.finish_reasons"] != `["length"]` {
		t.Errorf("chat span attributes %v", a)
	}
	var names []string
	for _, ev := range s.Events {
		names = append(names, ev.Name)
	}
	if len(names) != 3 || names[0] != "model_call.queued" || names[1] != "model_call.retry" || names[2] != "truncated_call" {
		t.Fatalf("chat span events %v", names)
	}
	for _, kv := range s.Events[1].Attributes {
		if kv.Key == "http.response.status_code" && kv.Value.AsInt64() != 429 {
			t.Errorf("retry event status %v", kv.Value.AsInt64())
		}
	}
}
