package scripted_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestLoop_ConversationsShareAScript runs the tools package's loop around
// one scripted model picking turns by conversation: several concurrent
// sessions each get the whole script, streaming calls included.
func TestLoop_ConversationsShareAScript(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Adding.", ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":1,"b":2}`, Split: 3}}},
		{Text: "Adding again.", ToolCalls: []scripted.ToolCall{{ID: "call_2", Name: "add", Arguments: `{"a":3,"b":4}`}}},
		{Text: "3 and 7."},
	}}, nil)
	type in struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds"},
		func(_ context.Context, in in) (int, error) { return in.A + in.B, nil })
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{add}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := modeltest.Runtime(t).Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	const sessions = 4
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		if err := conn.SendAll(messages.RawParam(id, "messages", json.RawMessage(`[{"role":"user","content":"add"}]`)), messages.End(id)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range sessions {
		frames, err := conn.RecvStream(ctx, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		var text, results string
		for _, f := range frames {
			switch f.GetType() {
			case messages.FrameType_TEXT:
				text += f.GetText()
			case messages.FrameType_TOOL_RESULT:
				results += string(f.GetPayload()) + ";"
			case messages.FrameType_ERROR:
				t.Fatalf("session %d failed: %s", i, f.GetText())
			}
		}
		if text != "Adding.Adding again.3 and 7." || results != "3;7;" {
			t.Fatalf("session %d: text %q results %q", i, text, results)
		}
	}
	if n := model.Served(); n != 3*sessions {
		t.Fatalf("model served %d requests, want %d", n, 3*sessions)
	}
}
