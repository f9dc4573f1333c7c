package agent_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestApprovalResume_AnswersShareNothing: without a Store, the answer a
// Run returned as its session waits is the host's: what the host does to
// it does not reach the answer of a Resume that goes on with the held
// call, nor does that Resume change it.
func TestApprovalResume_AnswersShareNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		m := scripted.MustNew(scripted.Script{Select: scripted.BySequence, Turns: []scripted.Turn{
			{Text: "Echoing.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
			{ToolCalls: []scripted.ToolCall{call("c2", "launch", `{"target":"moon"}`)}},
			{Text: "Done."},
		}}, nil)
		a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), newLauncher().tool()},
			Approval: &tools.ApprovalOptions{}})
		ran, err := a.Run(context.Background(), "s1", ask)
		waiting(t, err, "c2")
		if len(ran.Rounds) != 1 || ran.Rounds[0].Text != "Echoing." {
			t.Fatalf("the waiting Run answered the rounds %+v, want the echo's", ran.Rounds)
		}
		ran.Rounds[0].Text = "changed by the host"
		ans, err := a.Resume(context.Background(), "s1", nil, agent.Approve("c2"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ran.Rounds) != 1 {
			t.Errorf("the Resume changed the answer the Run had returned: its rounds are now %+v", ran.Rounds)
		}
		if len(ans.Rounds) != 2 || ans.Rounds[0].Text != "Echoing." {
			t.Errorf("the Resume answered the rounds %+v, want the first said %q, not what the host wrote into the Run's answer",
				ans.Rounds, "Echoing.")
		}
	})
}
