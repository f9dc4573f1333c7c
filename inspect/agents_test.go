package inspect_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// inspectedStore returns a runtime, an inspector of it made with opts,
// and a memstore watched through the inspector's Store; all are closed
// when the test ends.
func inspectedStore(t *testing.T, opts *inspect.Options) (*actors.Runtime, *inspect.Inspector, durability.Store) {
	t.Helper()
	rt, in := inspected(t, nil, opts)
	inner := memstore.New(nil)
	t.Cleanup(func() { inner.Close() })
	return rt, in, in.Store(inner)
}

// listedIDs are the ids of the session list.
func listedIDs(in *inspect.Inspector) []string {
	var ids []string
	for _, s := range in.Snapshot("").Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestStore_AgentSessionDurabilityPosition: an agent with a Store
// persists its sessions under agent.SessionKey of its name and the
// session id ("bot/s1"), while its streams carry the session id ("s1"):
// watched through Inspector.Store, the position must be its session's
// (the page promises it), not a second, empty session listed beside
// it. So also for a durable agent's sessions running side by side,
// each on a loop of its own (the second loop's actor is "bot-2"), and
// the record of a session's calls held for approval is no session.
func TestStore_AgentSessionDurabilityPosition(t *testing.T) {
	rt, in, store := inspectedStore(t, nil)
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	wait := tools.MustNew(tools.Definition{Name: "wait", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "ok", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "wait", Arguments: `{}`}}},
		{Text: "done"},
	}}, nil)
	a, err := agent.New(rt, in.Model(model.Spec("model")), &agent.Options{Name: "bot", Store: store,
		Tools: []*tools.Tool{wait}, OnToolResult: in.OnToolResult})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	var wg sync.WaitGroup
	for _, id := range []string{"s1", "s2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Run(testCtx(t), id, []models.Message{models.UserMessage("Go.")}); err != nil {
				t.Error(err)
			}
		}()
	}
	<-started
	<-started // both sessions' loops run
	close(release)
	wg.Wait()
	// What a session's calls held for approval are kept under.
	if err := store.PersistSnapshot(testCtx(t), a.SessionKey("s1")+tools.ApprovalStoreSuffix, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}

	if ids := listedIDs(in); len(ids) != 2 || ids[0] != "s1" || ids[1] != "s2" {
		t.Errorf("sessions listed %q, want only the agent's sessions [\"s1\" \"s2\"]", ids)
	}
	for _, id := range []string{"s1", "s2"} {
		d := in.Snapshot(id).Session
		if d == nil || d.Answer != "done" || d.Agent != "bot" || d.Session != id {
			t.Fatalf("session %s not shown with its agent and answer: %+v", id, d)
		}
		if d.Durability == nil || d.Durability.Index == 0 {
			t.Errorf("session %s shows no durability position (%+v), though its agent persisted it through Inspector.Store", id, d.Durability)
		}
	}
}

// TestSessions_TwoAgentsOneSessionID: session ids are the agent's, and a
// host naturally uses one id per user for each of its agents. Two
// agents' sessions of one id are two sessions: listed apart (by their
// agents' session keys), each with its own requests, conversation and
// answer; the results of their calls, of the same call id, go each to
// its own session.
func TestSessions_TwoAgentsOneSessionID(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	echo := tools.MustNewTyped(tools.Definition{Name: "echo"},
		func(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil })
	for _, name := range []string{"alice", "bob"} {
		model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "echo", Arguments: `{"x":1}`}}},
			{Text: name + "'s answer"},
		}}, nil)
		a, err := agent.New(rt, in.Model(model.Spec("model")), &agent.Options{Name: name, Tools: []*tools.Tool{echo}, OnToolResult: in.OnToolResult})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(context.Background()) })
		if _, err := a.Run(testCtx(t), "user-42", []models.Message{models.UserMessage("Hello from " + name)}); err != nil {
			t.Fatal(err)
		}
	}
	snap := in.Snapshot("")
	if len(snap.Sessions) != 2 {
		for _, s := range snap.Sessions {
			t.Logf("listed: %q with %d requests", s.ID, s.Requests)
		}
		t.Fatalf("two agents' sessions of one id listed as %q, want one session per agent", listedIDs(in))
	}
	for i, name := range []string{"alice", "bob"} {
		s := snap.Sessions[i]
		if key := agent.SessionKey(name, "user-42"); s.ID != key || s.Agent != name || s.Requests != 2 || !s.Answered || s.Pending != 0 {
			t.Errorf("listed %+v, want %s's session as %q: 2 requests, answered, no call pending", s, name, key)
		}
		d := in.Snapshot(s.ID).Session
		if d == nil || d.Answer != name+"'s answer" || d.Agent != name || d.Session != "user-42" || len(d.Pending) != 0 {
			t.Errorf("%s's session shows %+v", name, d)
		}
		if len(d.Conversation) == 0 || d.Conversation[0].Text != "Hello from "+name {
			t.Errorf("%s's session shows the conversation %+v", name, d.Conversation)
		}
	}
	if in.Snapshot("user-42").Session != nil {
		t.Errorf("the id two agents' sessions share selects one of them")
	}
	for _, tf := range snap.Tools {
		if tf.Name == "echo" && tf.Calls != 2 {
			t.Errorf("echo counted %d calls, want 2", tf.Calls)
		}
	}
}
