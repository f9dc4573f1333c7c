package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

// TestLoop_EndToEnd runs the tools package's loop around the OpenAI
// adapter against a server streaming real SSE: two parallel calls sent at
// index 0, then the answer. The server checks the follow-up request the
// loop builds from the adapter's frames.
func TestLoop_EndToEnd(t *testing.T) {
	turn1 := sse(chunk(roleChunk, ""), content("Greeting both."),
		first(0, "call_A", "greet", ""), args(0, `{"name":`), args(0, `"Ada"}`),
		first(0, "call_B", "greet", `{"name":"Grace"}`),
		finish("tool_calls"), usage, done)
	turn2 := sse(chunk(roleChunk, ""), content("Both greeted."), finish("stop"), usage, done)
	var followUp error
	rg := newRig(t, openai.Options{}, func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) {
		if n == 1 {
			if followUp = checkLoopFollowUp(body); followUp != nil {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"bad follow-up"}}`)
				return
			}
		}
		if n > 1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		streamBody([]string{turn1, turn2}[n])(n, w, r, body)
	})
	// The rig's adapter is not used here: the loop owns its own.
	_ = rg
	type in struct {
		Name string `json:"name"`
	}
	greet := tools.MustNewTyped(tools.Definition{Name: "greet", Description: "Greets someone"},
		func(_ context.Context, in in) (string, error) { return "Hello, " + in.Name, nil })
	model, err := openai.New(&openai.Options{BaseURL: rg.baseURL, HTTPClient: rg.client, Model: "gpt-4o-mini", MaxRetries: openai.NoRetries})
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
		`TOOL_CALL call_A {"name":"Ada"}`, `TOOL_CALL call_B {"name":"Grace"}`,
		`TOOL_RESULT call_A "Hello, Ada"`, `TOOL_RESULT call_B "Hello, Grace"`,
		"text Both greeted.", "END"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loop output\n got  %q\n want %q\nfollow-up check: %v", got, want, followUp)
	}
	if followUp != nil {
		t.Fatal(followUp)
	}
}

// checkLoopFollowUp checks the second request: the assistant message
// carries the calls as streamed, and one tool message per call id follows
// it, in call order.
func checkLoopFollowUp(body map[string]json.RawMessage) error {
	var msgs []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return err
	}
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		if len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "call_A" || m.ToolCalls[1].ID != "call_B" ||
			!modeltest.JSONEqual([]byte(m.ToolCalls[0].Function.Arguments), []byte(`{"name":"Ada"}`)) {
			return fmt.Errorf("assistant message %+v", m)
		}
		if len(msgs) != i+3 || msgs[i+1].Role != "tool" || msgs[i+1].ToolCallID != "call_A" || msgs[i+2].ToolCallID != "call_B" {
			return fmt.Errorf("messages after the assistant: %+v", msgs[i+1:])
		}
		if _, ok := body["tools"]; !ok {
			return fmt.Errorf("follow-up has no tools")
		}
		return nil
	}
	return fmt.Errorf("no assistant message in %s", body["messages"])
}

// TestLoop_LengthCutCallIsAnswered: the answer stops with finish_reason
// "length" in the middle of a write_file call's arguments. The loop closes
// the call as failed without running it (no file is written) and the
// follow-up carries the assistant turn and a tool message telling the
// model its arguments were cut off and to send smaller pieces.
func TestLoop_LengthCutCallIsAnswered(t *testing.T) {
	turn1 := sse(chunk(roleChunk, ""), content("Writing the file."),
		first(0, "call_W", "write_file", ""), args(0, `{"path":"big.txt","content":"lorem ipsum dolor`),
		finish("length"), usage, done)
	turn2 := sse(chunk(roleChunk, ""), content("I will write it in parts."), finish("stop"), usage, done)
	var followUp error
	rg := newRig(t, openai.Options{}, func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) {
		if n == 1 {
			if followUp = checkCutFollowUp(body); followUp != nil {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"message":"bad follow-up"}}`)
				return
			}
		}
		if n > 1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		streamBody([]string{turn1, turn2}[n])(n, w, r, body)
	})
	dir := t.TempDir()
	ws, err := workspace.New(dir, &workspace.Options{Sandbox: workspace.SandboxOff})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	wsTools, err := workspace.Tools(ws)
	if err != nil {
		t.Fatal(err)
	}
	model, err := openai.New(&openai.Options{BaseURL: rg.baseURL, HTTPClient: rg.client, Model: "gpt-4o-mini", MaxRetries: openai.NoRetries})
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
	if err := conn.SendAll(messages.RawParam("s1", "messages", json.RawMessage(`[{"role":"user","content":"Write big.txt"}]`)), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	frames, err := conn.RecvStream(rg.ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
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
	want := []string{"text Writing the file.", "call call_W {}", "result call_W error=true kind=truncated", "text I will write it in parts.", "END"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loop output\n got  %q\n want %q\nfollow-up check: %v", got, want, followUp)
	}
	if followUp != nil {
		t.Fatal(followUp)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("workspace holds %v (%v): the cut call ran", entries, err)
	}
}

// checkCutFollowUp checks the follow-up after a cut call: the assistant
// message with the call and {} arguments, then its tool message saying
// what happened.
func checkCutFollowUp(body map[string]json.RawMessage) error {
	var msgs []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return err
	}
	if len(msgs) != 3 || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 || msgs[1].Content != "Writing the file." {
		return fmt.Errorf("messages %s", body["messages"])
	}
	if c := msgs[1].ToolCalls[0]; c.ID != "call_W" || c.Function.Name != "write_file" || c.Function.Arguments != "{}" {
		return fmt.Errorf("assistant call %+v", c)
	}
	tool := msgs[2]
	if tool.Role != "tool" || tool.ToolCallID != "call_W" || !strings.Contains(tool.Content, `"success":false`) ||
		!strings.Contains(tool.Content, "cut off by the length limit") || !strings.Contains(tool.Content, "smaller pieces") {
		return fmt.Errorf("tool message %+v", tool)
	}
	return nil
}
