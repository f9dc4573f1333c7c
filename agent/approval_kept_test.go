package agent_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestApprovalResume_NoDecisionKeepsTheRunsRounds: without a Store, a
// Run whose first attempt failed after a round ran (kept) leaves its
// session waiting on the second attempt's held call, its answer holding
// the kept round. A Resume that applies no decision returns the session's
// *WaitingError at once with what was answered so far: the same rounds,
// the kept one included, not the waiting attempt's alone; one that
// approves the held call answers with every round once: the kept one,
// then the approved call's.
func TestApprovalResume_NoDecisionKeepsTheRunsRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		m := scripted.MustNew(scripted.Script{Select: scripted.BySequence, Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
			{Error: "the model is overloaded"}, // the first attempt fails, its round kept
			{ToolCalls: []scripted.ToolCall{call("c2", "launch", `{"target":"moon"}`)}},
			{Text: "Done."},
		}}, nil)
		a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
			Approval: &tools.ApprovalOptions{}})
		ran, err := a.Run(context.Background(), "s1", ask)
		waiting(t, err, "c2")
		resumed, err := a.Resume(context.Background(), "s1", nil)
		waiting(t, err, "c2")
		if got, want := callIDs(resumed), callIDs(ran); !equalIDs(want, []string{"c1"}) || !equalIDs(got, want) {
			t.Errorf("the Resume that applied no decision answered with the calls %v, the Run with %v: want the Run's, c1", got, want)
		}
		ans, err := a.Resume(context.Background(), "s1", nil, agent.Approve("c2"))
		if err != nil {
			t.Fatal(err)
		}
		if got := callIDs(ans); !equalIDs(got, []string{"c1", "c2"}) || ans.Text != "Done." {
			t.Errorf("the Resume that approved c2 answered %q with the calls %v, want c1 then c2, each once", ans.Text, got)
		}
	})
}

// callIDs lists the ids of ans's calls, round by round.
func callIDs(ans *models.Answer) []string {
	var ids []string
	for _, r := range ans.Rounds {
		for _, c := range r.Calls {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
