package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestLoopApproval_PolicyPanicIsAnAnswer: an approval policy is the
// host's code, run on the loop's goroutine for each call. One that
// panics on a call (a nil map, an index out of range on odd arguments)
// answers that call, not run, with one error result, as a validation
// that panics does (see ApprovalAnswer): the call gets its one result,
// the round goes on, and the other calls and streams of the loop are
// not lost with a restart of the loop.
func TestLoopApproval_PolicyPanicIsAnAnswer(t *testing.T) {
	ran := make(chan string, 4)
	nuke := tools.MustNew(tools.Definition{Name: "nuke", Irreversible: true, Capabilities: []string{"execute"},
		Handler: func(_ context.Context, args json.RawMessage) (any, error) { ran <- string(args); return nil, nil }})
	script := [][]*messages.Frame{{
		messages.ToolCall("", "c1", "weather", raw(`{"city":"Paris"}`)),
		messages.ToolCall("", "c2", "nuke", raw(`{"x":1}`)),
		messages.End(""),
	}, {
		messages.Text("", "ok"), messages.End(""),
	}}
	policy := func(c tools.ApprovalCall) (tools.Verdict, string) {
		if c.Tool.Name == "nuke" {
			var rules map[string]tools.Verdict
			rules["nuke"] = tools.VerdictAsk // a bug of the host's: assignment to a nil map
		}
		return tools.VerdictRun, ""
	}
	rt := newRuntime(t)
	conn := startLoop(t, rt, script, nil, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{weather(), nuke}},
		Approval:      &tools.ApprovalOptions{Policy: policy},
	}, request("s1"))
	frames, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(lines(frames), "\n")
	if !strings.Contains(out, "TOOL_RESULT stream=s1 id=c2 name=nuke") || !strings.Contains(out, "TOOL_RESULT stream=s1 id=c1 name=weather") ||
		strings.Contains(out, "ERROR stream=s1") || !strings.Contains(out, "id=c2 name=nuke is_error failure_kind=denied") ||
		!strings.Contains(out, "the approval policy panicked: assignment to entry in nil map") {
		t.Fatalf("a policy that panics on c2: want c1 answered, c2 denied naming the panic, and the stream going on, got\n%s", out)
	}
	if len(ran) != 0 {
		t.Fatalf("nuke ran though its policy panicked")
	}
}
