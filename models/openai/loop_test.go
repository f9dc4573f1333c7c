package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
	"github.com/polyweave/polyweave-go/tools"
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
