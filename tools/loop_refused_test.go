package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestLoop_RefusedRequestLeavesTheStreamClean: a request the loop
// refuses itself (messages that are not a list) sends the model nothing,
// its END included, so the next request on the same stream id meets no
// late answer of the model to the refused one; and the stream's END goes
// out once the caller's END has come, when the loop has forgotten it.
func TestLoop_RefusedRequestLeavesTheStreamClean(t *testing.T) {
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "Hi."}}}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Name: "loop"}})
	if err != nil {
		t.Fatal(err)
	}
	conn := start(t, newRuntime(t), loop)
	for i := range 20 {
		send(t, conn, messages.RawParam("s", models.ParamMessages, json.RawMessage(`"not a list"`)), messages.End("s"))
		first, err := conn.RecvStream(testCtx(t), "s")
		if err != nil {
			t.Fatal(err)
		}
		send(t, conn, messages.RawParam("s", models.ParamMessages, json.RawMessage(`[{"role":"user","content":"hi"}]`)), messages.End("s"))
		second, err := conn.RecvStream(testCtx(t), "s")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(lines(second), "\n")
		if len(first) != 2 || first[0].GetType() != messages.FrameType_ERROR || strings.Contains(got, "ERROR") || !strings.Contains(got, `text="Hi."`) {
			t.Fatalf("round %d: refused request %q, then %s", i, lines(first), got)
		}
	}
	if n := len(model.Requests()); n != 20 {
		t.Errorf("the model got %d requests, want the 20 valid ones", n)
	}
}
