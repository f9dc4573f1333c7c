package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/tools"
)

// TestLoop_EndToEnd runs the tools package's loop around the Anthropic
// adapter against a server speaking the Messages API: two parallel
// tool_use blocks (one tool fails), then the answer. The server checks the
// follow-up the loop builds: the assistant turn with both tool_use blocks,
// then one user turn starting with both tool_results, the failed one
// marked is_error.
func TestLoop_EndToEnd(t *testing.T) {
	turn1 := sse(messageStart(30, 0, 0), textStart(0), textDelta(0, "Greeting both."), blockStop(0),
		toolStart(1, "toolu_A", "greet"), inputDelta(1, ""), toolStart(2, "toolu_B", "greet"),
		inputDelta(2, `{"name":"Grace"}`), inputDelta(1, `{"name":"Ada"}`), blockStop(1), blockStop(2),
		messageDelta("tool_use", 20), messageStop)
	turn2 := sse(messageStart(60, 0, 0), textStart(0), textDelta(0, "Ada greeted; Grace failed."), blockStop(0), messageDelta("end_turn", 7), messageStop)
	var rejected error
	check := func(n int, body map[string]json.RawMessage) error {
		if n != 1 {
			return nil
		}
		want := `[{"role":"user","content":[{"type":"text","text":"Greet Ada and Grace"}]},
			{"role":"assistant","content":[{"type":"text","text":"Greeting both."},{"type":"tool_use","id":"toolu_A","name":"greet","input":{"name":"Ada"}},{"type":"tool_use","id":"toolu_B","name":"greet","input":{"name":"Grace"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_A","content":"\"Hello, Ada\""},{"type":"tool_result","tool_use_id":"toolu_B","content":"{\"success\":false,\"error\":\"Grace is busy\"}","is_error":true}]}]`
		if !modeltest.JSONEqual(body["messages"], []byte(want)) {
			return fmt.Errorf("follow-up messages %s", body["messages"])
		}
		if _, ok := body["tools"]; !ok {
			return fmt.Errorf("follow-up has no tools")
		}
		return nil
	}
	rg := newRig(t, anthropic.Options{}, answerOrReject([]string{turn1, turn2}, check, &rejected))
	type in struct {
		Name string `json:"name"`
	}
	greet := tools.MustNewTyped(tools.Definition{Name: "greet", Description: "Greets someone"},
		func(_ context.Context, in in) (string, error) {
			if in.Name == "Grace" {
				return "", fmt.Errorf("Grace is busy")
			}
			return "Hello, " + in.Name, nil
		})
	model, err := anthropic.New(&anthropic.Options{BaseURL: rg.url, HTTPClient: rg.http, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{greet}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := modeltest.Runtime(t).Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.RawParam("s1", "messages", json.RawMessage(`[{"role":"user","content":"Greet Ada and Grace"}]`)), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(rg.ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			got = append(got, "text "+f.GetText())
		case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR:
			got = append(got, fmt.Sprintf("%s %s %s%s", f.GetType(), f.GetToolCallId(), f.GetPayload(), f.GetText()))
		case messages.FrameType_END:
			got = append(got, "END")
		}
	}
	want := []string{"text Greeting both.",
		`TOOL_CALL toolu_A {"name":"Ada"}`, `TOOL_CALL toolu_B {"name":"Grace"}`,
		`TOOL_RESULT toolu_A "Hello, Ada"`, `TOOL_RESULT toolu_B {"success":false,"error":"Grace is busy"}`,
		"text Ada greeted; Grace failed.", "END"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loop output\n got  %q\n want %q\nserver: %v", got, want, rejected)
	}
	if rejected != nil {
		t.Fatal(rejected)
	}
}
