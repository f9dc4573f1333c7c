package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// A host driving a tool loop with an approval policy by hand: the
// irreversible call waits for a person; an answer about a call that does
// not wait (a typo in its id) is refused at once, the round saying again
// what it waits for; the right answer runs the call.
func ExampleApprovalRefusal() {
	wipe := tools.MustNew(tools.Definition{Name: "wipe", Irreversible: true,
		Handler: func(context.Context, json.RawMessage) (any, error) { return "wiped", nil }})
	model := tooltest.ScriptedModel("model", [][]*messages.Frame{
		{messages.ToolCall("", "call_1", "wipe", json.RawMessage(`{}`)), messages.End("")},
		{messages.Text("", "Done."), messages.End("")},
	}, nil)
	loop, err := tools.NewLoop(model, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{wipe}},
		Approval:      &tools.ApprovalOptions{},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, close := startAsked(ctx, loop, `[{"role":"user","content":"Wipe it"}]`) // on a runtime, asked on s1
	defer close()
	answered := false
	for !answered {
		f, err := conn.Recv(ctx)
		if err != nil {
			panic(err)
		}
		switch f.GetName() {
		case tools.MetaApprovalWaiting:
			fmt.Println("waiting; answering about call_9")
			_ = conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "call_9", Decision: tools.DecisionApprove}))
		case tools.MetaApprovalRefused:
			var r tools.ApprovalRefusal
			if err := json.Unmarshal(f.GetPayload(), &r); err != nil {
				panic(err)
			}
			fmt.Println("refused:", r.ToolCallID, r.Reason, errors.Is(r.Err(), tools.ErrNotHeld))
			if f, err = conn.Recv(ctx); err != nil || f.GetName() != tools.MetaApprovalWaiting {
				panic(fmt.Sprint(f, err))
			}
			fmt.Println("still waiting; approving call_1")
			_ = conn.Send(tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "call_1", Decision: tools.DecisionApprove}))
			answered = true
		}
	}
	rest, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		panic(err)
	}
	for _, f := range rest {
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			fmt.Printf("result %s %s\n", f.GetToolCallId(), f.GetPayload())
		case messages.FrameType_TEXT:
			fmt.Println("text", f.GetText())
		}
	}
	// Output:
	// waiting; answering about call_9
	// refused: call_9 not_held true
	// still waiting; approving call_1
	// result call_1 "wiped"
	// text Done.
}
