package agent_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// conversationIDs runs session "s1" on an agent traced by a Telemetry of
// opts whose loop crashes as it reports its first tool result, so that
// the Run takes a second attempt (stream "s1#2"), and returns the
// gen_ai.conversation.id of each run span.
func conversationIDs(t *testing.T, opts telemetry.Options) []string {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	exp := tracetest.NewInMemoryExporter()
	opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := telemetry.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	rt := actorstest.NewRuntime(t, nil)
	var crashed atomic.Bool
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "Done."},
	), &agent.Options{Name: "talker", Telemetry: tel, Tools: []*tools.Tool{echo(nil)}, OnToolResult: func(tools.ToolResultEvent) {
		if crashed.CompareAndSwap(false, true) {
			panic("injected: loop crash")
		}
	}})
	ctx := testCtx(t)
	if ans, err := a.Run(ctx, "s1", ask); err != nil || ans.Text != "Done." {
		t.Fatalf("run: %v, %+v", err, ans)
	}
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range exp.GetSpans() {
		if s.Name != "invoke_agent talker" {
			continue
		}
		id := "<none>"
		for _, kv := range s.Attributes {
			if kv.Key == attribute.Key("gen_ai.conversation.id") {
				id = kv.Value.AsString()
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// TestTelemetry_ConversationIDIsTheSession: with agent.SessionOf's
// session as its ConversationID, a Telemetry gives each run span of an
// agent's session, the attempt after a loop restart's included (stream
// "s1#2"), the session id as gen_ai.conversation.id, the conversation's
// id by the GenAI conventions: not the attempt's stream id.
func TestTelemetry_ConversationIDIsTheSession(t *testing.T) {
	ids := conversationIDs(t, telemetry.Options{ConversationID: func(stream string) string {
		session, _ := agent.SessionOf(stream)
		return session
	}})
	if len(ids) != 2 || slices.ContainsFunc(ids, func(id string) bool { return id != "s1" }) {
		t.Fatalf("gen_ai.conversation.id of the run spans: %q, want two (a first attempt and one after the restart), both the session %q", ids, "s1")
	}
}
