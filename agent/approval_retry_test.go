package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// resumeDeadline bounds a Resume that should answer at once: past it, it
// hangs (a failure is an answer, not a hang).
const resumeDeadline = 10 * time.Second

// TestApprovalResume_AttemptFailsAfterApproval: a Resume whose attempt
// fails after the approved call ran (the model's next answer fails) makes
// a new attempt, as Run does, with or without a Store, and the model
// makes a call of the same id again (as a model without ids of its own
// does), held anew. Resume then answers (a *WaitingError for the call
// held anew, an answer or an error); it does not wait for ever because
// the decision it sent on the failed attempt bears the same call id.
func TestApprovalResume_AttemptFailsAfterApproval(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { attemptFailsAfterApproval(t, nil) })
	t.Run("with a Store", func(t *testing.T) {
		store := memstore.New(nil)
		defer store.Close()
		attemptFailsAfterApproval(t, store)
	})
}

func attemptFailsAfterApproval(t *testing.T, store durability.Store) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	m := scripted.MustNew(scripted.Script{Select: scripted.BySequence, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{call("c2", "launch", `{"target":"moon"}`)}},
		{Error: "the model is overloaded"}, // the request after the approved call ran
		{ToolCalls: []scripted.ToolCall{call("c2", "launch", `{"target":"moon"}`)}},
		{Text: "Done."},
	}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{l.tool()}, Approval: &tools.ApprovalOptions{}, Store: store})
	_, err := a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	ctx, cancel := context.WithTimeout(context.Background(), resumeDeadline)
	defer cancel()
	_, err = a.Resume(ctx, "s1", ask, agent.Approve("c2"))
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Resume hung until its ctx ended (%v): %v; %d launches, waiting sessions %v", resumeDeadline, err, l.runs.Load(), a.Waiting())
	} // The approval was for the call that ran; the call made anew waits
	// for its own.
	waiting(t, err, "c2")
	if n := l.runs.Load(); n != 1 {
		t.Fatalf("%d launches; the one approved call ran once, the call made anew waits", n)
	}
}

// TestApprovalResume_LoopRestartedWhileWaiting: without a Store, the
// agent's loop restarts (a panic) while a session waits for approval:
// the held call is answered as cancelled. A Resume of the session then
// answers; it does not hang until its ctx ends.
func TestApprovalResume_LoopRestartedWhileWaiting(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	m := approvalScript(t)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()}, Approval: &tools.ApprovalOptions{}})
	_, err := a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	if err := rt.InjectPanic("polyweave/agent", "injected"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resumeDeadline)
	defer cancel()
	_, err = a.Resume(ctx, "s1", ask, agent.Approve("c2"))
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Resume hung until its ctx ended (%v): %v; %d launches, waiting sessions %v", resumeDeadline, err, l.runs.Load(), a.Waiting())
	} // The approval was for the call the restart cancelled: the call the
	// model made anew waits for its own.
	waiting(t, err, "c2")
	if n := l.runs.Load(); n != 0 {
		t.Fatalf("%d launches; the approval of the cancelled call ran the call made anew", n)
	}
	if err := a.Discard(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
}

// TestApproval_WaitingAfterLoopRestart: without a Store, the agent's loop
// restarts (a panic) while session s1 waits for approval: its held call
// is answered as cancelled, so Waiting no longer lists it, nothing of it
// waiting for a person. A Resume of it still answers as its doc says (the
// decision ignored, the conversation sent again, the call made anew held
// anew), and Waiting lists it again, waiting for that call.
func TestApproval_WaitingAfterLoopRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		l := newLauncher()
		m := approvalScript(t)
		a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()}, Approval: &tools.ApprovalOptions{}})
		_, err := a.Run(context.Background(), "s1", ask)
		waiting(t, err, "c2")
		if got := a.Waiting(); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("Waiting before the restart: %v, want [s1]", got)
		}
		if err := rt.InjectPanic("polyweave/agent", "injected"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the restart has answered the held call and closed the stream
		if got := a.Waiting(); len(got) != 0 {
			t.Errorf("Waiting after the restart answered the held call as cancelled: %v, want none", got)
		}
		_, err = a.Resume(context.Background(), "s1", ask, agent.Approve("c2"))
		waiting(t, err, "c2")
		if got := a.Waiting(); !slices.Equal(got, []string{"s1"}) {
			t.Errorf("Waiting once the call made anew is held: %v, want [s1]", got)
		}
		if n := l.runs.Load(); n != 0 {
			t.Errorf("%d launches, want none", n)
		}
	})
}

// TestApprovalResume_WithoutMessagesSendsTheRunsAgain: without a Store,
// a Resume needs no messages (the held conversation is in the loop).
// When the loop restarted while the session waited (its held call
// answered as cancelled), the Resume sends the conversation again, as
// Run does: with the messages of the Run that left it waiting, not with
// an empty conversation.
func TestApprovalResume_WithoutMessagesSendsTheRunsAgain(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	m := approvalScript(t)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()}, Approval: &tools.ApprovalOptions{}})
	_, err := a.Run(testCtx(t), "s1", ask)
	waiting(t, err, "c2")
	if err := rt.InjectPanic("polyweave/agent", "injected"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Resume(testCtx(t), "s1", nil, agent.Approve("c2"))
	waiting(t, err, "c2") // the call made anew is held anew
	reqs := requestMessages(t, m)
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the Run's and the Resume's: %v", len(reqs), reqs)
	}
	if got := reqs[1]; len(got) != len(ask) || got[0].Content != ask[0].Content {
		t.Errorf("the Resume sent the conversation again as %+v, want the Run's messages %+v", got, ask)
	}
	if err := a.Discard(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
}
