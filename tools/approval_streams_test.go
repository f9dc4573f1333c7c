package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestLoopApproval_SameCallIDOnTwoStreams: a loop without a session store
// serves many streams (an agent's sessions), and tool call ids are the
// model's (an OpenAI-compatible server without ids gets "call_0", ...), so
// two streams may hold a call of the same id at once. Each stream's
// approval_required shows its own call's arguments, and approving one
// runs that call with the arguments the person saw.
func TestLoopApproval_SameCallIDOnTwoStreams(t *testing.T) {
	ran := make(chan string, 4)
	nuke := tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true, Capabilities: []string{"execute"},
		Handler: func(_ context.Context, args json.RawMessage) (any, error) { ran <- string(args); return nil, nil }})
	args := map[string]string{"s1": `{"target":"tmp/cache"}`, "s2": `{"target":"/"}`}
	// A model that answers each stream's first request with a call
	// "call_0" whose arguments are the stream's own.
	model := actors.Spec{Name: "model", New: func() actors.Logic {
		turns := map[string]int{}
		return actors.LogicFunc(func(c actors.Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok || f.GetType() != messages.FrameType_END {
				return
			}
			s := f.GetStreamId()
			turns[s]++
			if turns[s] == 1 {
				c.Emit(messages.ToolCall(s, "call_0", "nuke", raw(args[s])))
			} else {
				c.Emit(messages.Text(s, "done"))
			}
			c.Emit(messages.End(s))
		})
	}}
	spec, err := tools.NewLoop(model, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{nuke}},
		Approval:      &tools.ApprovalOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), spec)
	asked := map[string]string{}
	for _, s := range []string{"s1", "s2"} {
		if err := conn.SendAll(request(s)...); err != nil {
			t.Fatal(err)
		}
		for _, f := range recvN(t, conn, 3) { // TOOL_CALL, approval_required, approval_waiting
			if f.GetName() == tools.MetaApprovalRequired {
				var req tools.ApprovalRequest
				if err := json.Unmarshal(f.GetPayload(), &req); err != nil {
					t.Fatal(err)
				}
				asked[f.GetStreamId()] = string(req.Arguments)
			}
		}
	}
	for s, want := range args {
		if asked[s] != want {
			t.Errorf("approval_required on %s shows arguments %s, want the call's own %s", s, asked[s], want)
		}
	}
	// The person approves s2's call as shown to them.
	if err := conn.Send(tools.ApprovalFrame("s2", tools.ApprovalAnswer{ToolCallID: "call_0", Decision: tools.DecisionApprove})); err != nil {
		t.Fatal(err)
	}
	rest, err := conn.RecvStream(testCtx(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(lines(rest), "\n"); !strings.Contains(out, "TOOL_RESULT stream=s2 id=call_0") {
		t.Fatalf("after the approval:\n%s", out)
	}
	if got := <-ran; got != asked["s2"] {
		t.Fatalf("the approved call ran with %s, the person approved %s", got, asked["s2"])
	}
	// s1's call still waits for its own answer.
	if err := conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "call_0", Decision: tools.DecisionDeny})); err != nil {
		t.Fatal(err)
	}
	rest, err = conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if out := strings.Join(lines(rest), "\n"); !strings.Contains(out, "TOOL_RESULT stream=s1 id=call_0") || !strings.Contains(out, "denied by the person") {
		t.Fatalf("s1 after its denial:\n%s", out)
	}
}
