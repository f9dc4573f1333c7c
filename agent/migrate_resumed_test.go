package agent_test

import (
	"context"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestLegacy_MigrateAfterResumeEndedAtMaxIterations: a released session
// stopped in the middle of its last allowed response (a call surfaced,
// then the model failed), at MaxIterations 1. MigrateSessions crashes
// after it wrote the copy under the key; a Run resumes the copy there:
// the interrupted call is answered and, being past the limit, the round
// ends the session (LoopRoundEnded{Done}: no messages appended, text
// cleared). The key holds all the bare id holds and more, so the next
// MigrateSessions must complete the move (doc: "it deletes what is left
// under the bare id once the key holds all of it ... as Runs have taken
// it on since").
func TestLegacy_MigrateAfterResumeEndedAtMaxIterations(t *testing.T) {
	mem := memstore.New(nil)
	t.Cleanup(func() { mem.Close() })
	store := &crashingStore{Store: mem}
	store.ok.Store(-1)
	turns := []scripted.Turn{
		{Text: "Echoing.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		{Text: "Again.", ToolCalls: []scripted.ToolCall{call("c2", "echo", `{"text":"ho"}`)}, Error: "the model failed"},
	}

	// The released version: the session under the bare id, MaxIterations 1.
	releasedFailing(t, store, 1, turns...)
	old, ok, err := tools.ReadSession(context.Background(), store, "s1")
	if err != nil || !ok || old.GetPhase() == messages.LoopPhase_LOOP_PHASE_DONE || len(old.GetCalls()) != 1 || old.GetIteration() != 1 {
		t.Fatalf("released session: %v, %v, %v; want one stopped mid-response with c2, iteration 1", old, ok, err)
	}

	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, turns...), &agent.Options{Store: store, Tools: []*tools.Tool{echo(nil)},
		MaxIterations: 1, MaxAttempts: 1})
	key := a.SessionKey("s1")

	crashMidMigration(t, a, store)

	ans, err := a.Run(testCtx(t), "s1", ask) // resumes the copy under the key
	t.Logf("Run under the key: %+v, %v", ans, err)
	to, _, err := tools.ReadSession(context.Background(), store, key)
	if err != nil || to.GetPhase() != messages.LoopPhase_LOOP_PHASE_DONE {
		t.Fatalf("session under the key after the Run: %v, %v; want it ended", to, err)
	}

	if err := a.MigrateSessions(testCtx(t), "s1"); err != nil {
		t.Errorf("MigrateSessions after the Run took the session on: %v; want the move completed", err)
	}
	if _, ok, _ := tools.ReadSession(context.Background(), store, "s1"); ok {
		t.Errorf("the bare id still holds the session")
	}
}

// releasedFailing runs session "s1" as the released version did (stored
// under the bare id), with maxIter, until its stream ends.
func releasedFailing(t *testing.T, store durability.Store, maxIter int, turns ...scripted.Turn) {
	t.Helper()
	releasedLoop(t, model(t, turns...), &tools.LoopOptions{MaxIterations: maxIter,
		RouterOptions: tools.RouterOptions{Name: agent.DefaultName, Tools: []*tools.Tool{echo(nil)}},
		Session:       &tools.SessionOptions{ID: "s1", Store: store}})
}

// crashMidMigration makes a's MigrateSessions of "s1" crash once the copy
// under the key is written, and checks the copy is there.
func crashMidMigration(t *testing.T, a *agent.Agent, store *crashingStore) {
	t.Helper()
	store.ok.Store(1) // the copy under the key is written, then the crash
	if err := a.MigrateSessions(testCtx(t), "s1"); err == nil {
		t.Fatal("the migration did not crash")
	}
	store.ok.Store(-1)
	if _, ok, _ := tools.ReadSession(context.Background(), store, a.SessionKey("s1")); !ok {
		t.Fatal("no copy under the key")
	}
}

// TestLegacy_MigrateAfterResumeResentTheRequest: the released session's
// model failed after saying part of its answer, no call made: the
// session is stored in the middle of the response with that text. The
// migration crashes after the copy; a Run resumes it under the key: the
// request is sent again (the stored text is dropped, LoopRequestSent)
// and the model answers, this time otherwise. The key holds all the
// bare id holds (its partial text was never part of the conversation),
// so the next MigrateSessions must complete the move.
func TestLegacy_MigrateAfterResumeResentTheRequest(t *testing.T) {
	mem := memstore.New(nil)
	t.Cleanup(func() { mem.Close() })
	store := &crashingStore{Store: mem}
	store.ok.Store(-1)
	releasedFailing(t, store, 0, scripted.Turn{Text: "Let me thi", Error: "the model failed"})
	old, ok, err := tools.ReadSession(context.Background(), store, "s1")
	if err != nil || !ok || old.GetPhase() == messages.LoopPhase_LOOP_PHASE_DONE || len(old.GetCalls()) != 0 {
		t.Fatalf("released session: %v, %v, %v; want one stopped mid-response", old, ok, err)
	}
	t.Logf("released session's stored text: %q", old.GetText())

	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hello."}), &agent.Options{Store: store, Tools: []*tools.Tool{echo(nil)}, MaxAttempts: 1})
	crashMidMigration(t, a, store)
	if ans, err := a.Run(testCtx(t), "s1", ask); err != nil || ans.Text != "Hello." {
		t.Fatalf("Run under the key: %+v, %v", ans, err)
	}
	if err := a.MigrateSessions(testCtx(t), "s1"); err != nil {
		t.Errorf("MigrateSessions after the Run took the session on: %v; want the move completed", err)
	}
	if _, ok, _ := tools.ReadSession(context.Background(), store, "s1"); ok {
		t.Errorf("the bare id still holds the session")
	}
}
