package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// TestAgent_OptionsTelemetry: an agent given a Telemetry (with a durable
// store) and a tapped model traces each Run as one trace named after the
// agent, across the agent's stream multiplexer.
func TestAgent_OptionsTelemetry(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":1}`}}},
		{Text: "2"},
	}}, nil)
	type in struct {
		A int `json:"a"`
	}
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds"}, func(_ context.Context, in in) (int, error) { return in.A + 1, nil })
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{OnSupervision: tel.Supervision})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer rt.Close(ctx)
	store := memstore.New(nil)
	defer store.Close()
	a, err := agent.New(rt, tel.Model(model.Spec("model"), "scripted"), &agent.Options{Name: "adder", Tools: []*tools.Tool{add}, Store: store, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	ans, err := a.Run(ctx, "session-1", []models.Message{models.UserMessage("add")})
	if err != nil || ans.Text != "2" {
		t.Fatalf("run: %v, %+v", err, ans)
	}
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var root tracetest.SpanStub
	spans := exp.GetSpans()
	for _, s := range spans {
		if s.Name == "invoke_agent adder" {
			root = s
		}
	}
	if !root.SpanContext.IsValid() {
		t.Fatalf("no run span among %d spans", len(spans))
	}
	count := map[string]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() == root.SpanContext.TraceID() && (s.Name == root.Name || s.Parent.SpanID() == root.SpanContext.SpanID()) {
			count[s.Name]++
		}
	}
	if count["chat"] != 2 || count["execute_tool add"] != 1 {
		t.Fatalf("spans under the run: %v (all: %d)", count, len(spans))
	}
}

// TestAgent_NameTakenThroughMeasuredStores: two agents of one name, each
// given the one store measured by Telemetry.Store on its own, would read
// and write each other's sessions; the second is refused as it is on the
// bare store, since the measured store says what it wraps.
func TestAgent_NameTakenThroughMeasuredStores(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	tel, _ := metricsTelemetry(t)
	rt := actorstest.NewRuntime(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	model := func() actors.Spec {
		return scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "hi"}}}, nil).Spec("model")
	}
	first, err := agent.New(rt, model(), &agent.Options{Name: "writer", Store: tel.Store(store)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	for _, s := range []durability.Store{tel.Store(store), store} {
		if a, err := agent.New(rt, model(), &agent.Options{Name: "writer", Store: s}); !errors.Is(err, agent.ErrNameTaken) {
			t.Errorf("second agent %q on %T over the first's store: %v, want ErrNameTaken", "writer", s, err)
			if err == nil {
				a.Close(ctx)
			}
		}
	}
}

// TestAgent_ConversationIDIsTheSession: a Telemetry whose ConversationID
// maps an agent's stream ids to its sessions (agent.SessionOf) gives the
// run span of a session "team#7" (whose stream id the agent escapes as
// "team%237") the session id as gen_ai.conversation.id, the
// conversation's id by the GenAI conventions, not the stream's.
func TestAgent_ConversationIDIsTheSession(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(&telemetry.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
		ConversationID: func(stream string) string { session, _ := agent.SessionOf(stream); return session },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	rt := actorstest.NewRuntime(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "hi"}}}, nil)
	a, err := agent.New(rt, tel.Model(model.Spec("model"), "scripted"), &agent.Options{Name: "talker", Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	const session = "team#7"
	if ans, err := a.Run(ctx, session, []models.Message{models.UserMessage("hi")}); err != nil || ans.Text != "hi" {
		t.Fatalf("run: %v, %+v", err, ans)
	}
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range exp.GetSpans() {
		if s.Name == "invoke_agent talker" {
			ids = append(ids, attrs(s)["gen_ai.conversation.id"])
		}
	}
	if len(ids) != 1 || ids[0] != session {
		t.Fatalf("gen_ai.conversation.id of the run spans: %q, want one, the session %q (the stream id is %q)", ids, session, agent.StreamID(session, 1))
	}
}
