package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
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

// TestLoop_LengthCutCallIsAnswered: the answer stops on max_tokens in
// the middle of a write_file call. The loop closes the call as failed
// without running it (no file is written), and the follow-up tells the
// model, in a tool_result marked is_error, that its arguments were cut
// off and to send smaller pieces; the model then answers.
func TestLoop_LengthCutCallIsAnswered(t *testing.T) {
	turn1 := sse(messageStart(30, 0, 0), textStart(0), textDelta(0, "Writing the file."), blockStop(0),
		toolStart(1, "toolu_W", "write_file"), inputDelta(1, ""), inputDelta(1, `{"path":"big.txt","content":"lorem ipsum dolor`),
		messageDelta("max_tokens", 4096), messageStop)
	turn2 := sse(messageStart(60, 0, 0), textStart(0), textDelta(0, "I will write it in parts."), blockStop(0), messageDelta("end_turn", 7), messageStop)
	var rejected error
	check := func(n int, body map[string]json.RawMessage) error {
		if n != 1 {
			return nil
		}
		var msgs []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				ID        string          `json:"id"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   string          `json:"content"`
				IsError   bool            `json:"is_error"`
			} `json:"content"`
		}
		if err := json.Unmarshal(body["messages"], &msgs); err != nil {
			return err
		}
		if len(msgs) != 3 || len(msgs[1].Content) != 2 || len(msgs[2].Content) != 1 {
			return fmt.Errorf("follow-up messages %s", body["messages"])
		}
		use, result := msgs[1].Content[1], msgs[2].Content[0]
		if use.Type != "tool_use" || use.ID != "toolu_W" || string(use.Input) != "{}" {
			return fmt.Errorf("assistant turn %s", body["messages"])
		}
		if result.Type != "tool_result" || result.ToolUseID != "toolu_W" || !result.IsError ||
			!strings.Contains(result.Content, "cut off by the length limit") || !strings.Contains(result.Content, "smaller pieces") {
			return fmt.Errorf("tool_result %+v", result)
		}
		return nil
	}
	rg := newRig(t, anthropic.Options{}, answerOrReject([]string{turn1, turn2}, check, &rejected))
	dir := t.TempDir()
	frames := runLoopWithWorkspace(t, rg, dir, "Write big.txt")
	var got []string
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TOOL_CALL:
			got = append(got, fmt.Sprintf("call %s %s", f.GetToolCallId(), f.GetPayload()))
		case messages.FrameType_TOOL_RESULT:
			got = append(got, fmt.Sprintf("result %s error=%v kind=%s", f.GetToolCallId(), f.IsErrorResult(), f.GetMeta().GetFailureKind()))
		case messages.FrameType_TEXT:
			got = append(got, "text "+f.GetText())
		case messages.FrameType_ERROR:
			got = append(got, "ERROR "+f.GetText())
		case messages.FrameType_END:
			got = append(got, "END")
		}
	}
	want := []string{"text Writing the file.", "call toolu_W {}", "result toolu_W error=true kind=truncated", "text I will write it in parts.", "END"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loop output\n got  %q\n want %q\nserver: %v", got, want, rejected)
	}
	if rejected != nil {
		t.Fatal(rejected)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("workspace holds %v (%v): the cut call ran", entries, err)
	}
}

// runLoopWithWorkspace runs a tool loop with the workspace tools of dir
// around an adapter on rg's server, sends ask and returns the frames of
// the stream.
func runLoopWithWorkspace(t *testing.T, rg *rig, dir, ask string) []*messages.Frame {
	t.Helper()
	ws, err := workspace.New(dir, &workspace.Options{Sandbox: workspace.SandboxOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	wsTools, err := workspace.Tools(ws)
	if err != nil {
		t.Fatal(err)
	}
	model, err := anthropic.New(&anthropic.Options{BaseURL: rg.url, HTTPClient: rg.http, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: wsTools}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := modeltest.Runtime(t).Start(loop)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": ask}})
	if err := conn.SendAll(messages.RawParam("s1", "messages", msgs), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(rg.ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	return frames
}
