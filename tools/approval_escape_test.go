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

// The approval frames show a held call's arguments as the model wrote
// them: "<", ">" and "&" are not turned into \u003c, \u003e and \u0026,
// so a person approving `echo hi > f.txt && cat f.txt` reads just that.
func TestLoopApproval_ArgumentsNotHTMLEscaped(t *testing.T) {
	sh := tools.MustNew(tools.Definition{Name: "sh", Irreversible: true, Capabilities: []string{"execute"},
		Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
	const args = `{"command":"echo hi > f.txt && cat f.txt < in"}`
	model := actors.Spec{Name: "model", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_END {
				c.Emit(messages.ToolCall(f.GetStreamId(), "call_0", "sh", raw(args)))
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}}
	spec, err := tools.NewLoop(model, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{sh}},
		Approval:      &tools.ApprovalOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), spec)
	if err := conn.SendAll(request("s1")...); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range recvN(t, conn, 3) { // TOOL_CALL, approval_required, approval_waiting
		switch f.GetName() {
		case tools.MetaApprovalRequired, tools.MetaApprovalWaiting:
			seen++
			if p := string(f.GetPayload()); !strings.Contains(p, "echo hi > f.txt && cat f.txt < in") {
				t.Errorf("%s payload %s does not show the command as written", f.GetName(), p)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("saw %d approval frames, want approval_required and approval_waiting", seen)
	}
}
