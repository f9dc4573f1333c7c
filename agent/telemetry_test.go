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
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// conversationIDs runs session "s1" on an agent traced by a Telemetry of
// opts whose loop crashes as it reports its first tool result, so that
// the Run takes a second attempt (stream "s1#2"), and a request on stream
// "bare#2" of a bare tool loop tapped by the same Telemetry
// (Telemetry.Agent), and returns the gen_ai.conversation.id of each run
// span of the agent, sorted, and of the bare loop.
func conversationIDs(t *testing.T, opts telemetry.Options) (agentIDs, bareIDs []string) {
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
	loop, err := tools.NewLoop(model(t, scripted.Turn{Text: "hi"}), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: "bare"}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rt.Start(tel.Agent(loop))
	if err != nil {
		t.Fatal(err)
	}
	const stream = "bare#2"
	if err := conn.SendAll(messages.RawParam(stream, models.ParamMessages, models.EncodeMessages(ask)), messages.End(stream)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range exp.GetSpans() {
		id := "<none>"
		for _, kv := range s.Attributes {
			if kv.Key == attribute.Key("gen_ai.conversation.id") {
				id = kv.Value.AsString()
			}
		}
		switch s.Name {
		case "invoke_agent talker":
			agentIDs = append(agentIDs, id)
		case "invoke_agent bare":
			bareIDs = append(bareIDs, id)
		}
	}
	slices.Sort(agentIDs)
	return agentIDs, bareIDs
}

// TestTelemetry_ConversationIDIsTheSession: an agent's run spans, the
// attempt's after a loop restart included (stream "s1#2"), have the
// session id as gen_ai.conversation.id, the conversation's id by the
// GenAI conventions, not the attempt's stream id: with no
// Options.ConversationID, as the agent maps its own streams to sessions,
// and with agent.SessionOf's session as the host's ConversationID. A
// bare loop tapped by the same Telemetry keeps its stream id ("bare#2")
// when the host set no ConversationID: its stream is its conversation.
func TestTelemetry_ConversationIDIsTheSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts telemetry.Options
		bare string
	}{
		{"default", telemetry.Options{}, "bare#2"},
		{"host SessionOf", telemetry.Options{ConversationID: func(stream string) string {
			session, _ := agent.SessionOf(stream)
			return session
		}}, "bare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, bare := conversationIDs(t, tc.opts)
			if want := []string{"s1", "s1"}; !slices.Equal(ids, want) {
				t.Errorf("gen_ai.conversation.id of the agent's run spans: %q, want %q (a first attempt and one after the restart, both the session)", ids, want)
			}
			if want := []string{tc.bare}; !slices.Equal(bare, want) {
				t.Errorf("gen_ai.conversation.id of the bare loop's run spans: %q, want %q", bare, want)
			}
		})
	}
}

// TestTelemetry_HostConversationIDWins: a Telemetry made with
// Options.ConversationID gives the agent's run spans the host's ids, not
// the sessions the agent maps its streams to, as it gives a bare loop's.
func TestTelemetry_HostConversationIDWins(t *testing.T) {
	ids, bare := conversationIDs(t, telemetry.Options{ConversationID: func(stream string) string { return "host:" + stream }})
	if want := []string{"host:s1", "host:s1#2"}; !slices.Equal(ids, want) {
		t.Errorf("gen_ai.conversation.id of the agent's run spans: %q, want the host's %q", ids, want)
	}
	if want := []string{"host:bare#2"}; !slices.Equal(bare, want) {
		t.Errorf("gen_ai.conversation.id of the bare loop's run spans: %q, want the host's %q", bare, want)
	}
}
