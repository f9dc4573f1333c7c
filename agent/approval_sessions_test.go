package agent_test

import (
	"context"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestApproval_TwoSessionsSameCallID: without a Store one loop serves
// every session of the agent, and tool call ids are the model's (an
// OpenAI-compatible server that sends none gets "call_0", "call_1"...),
// so two sessions can wait on a call of the same id. The WaitingError
// of each lists its own call's arguments, and the call a Resume approves
// runs with the arguments the person was shown.
func TestApproval_TwoSessionsSameCallID(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	m := scripted.MustNew(scripted.Script{Select: scripted.BySequence, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{call("call_0", "launch", `{"target":"the test range"}`)}}, // session a
		{ToolCalls: []scripted.ToolCall{call("call_0", "launch", `{"target":"the capital"}`)}},    // session b
		{Text: "Done."},
		{Text: "Done."},
	}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{l.tool()}, Approval: &tools.ApprovalOptions{}})
	_, err := a.Run(testCtx(t), "a", ask)
	waiting(t, err, "call_0")
	_, err = a.Run(testCtx(t), "b", ask)
	shown := waiting(t, err, "call_0").Pending[0]
	if string(shown.Arguments) != `{"target":"the capital"}` {
		t.Errorf("session b waits for call_0 with arguments %s; its call's are {\"target\":\"the capital\"}", shown.Arguments)
	}
	if _, err := a.Resume(testCtx(t), "b", ask, agent.Approve("call_0")); err != nil {
		t.Fatal(err)
	}
	if got := <-l.targets; `{"target":"`+got+`"}` != string(shown.Arguments) {
		t.Fatalf("the person approved call_0 of session b shown as %s; it launched %q", shown.Arguments, got)
	}
	if err := a.Discard(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
}
