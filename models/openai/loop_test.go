package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
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
	rg := newRig(t, openai.Options{}, answerOrReject([]string{turn1, turn2}, checkLoopFollowUp, &followUp))
	type in struct {
		Name string `json:"name"`
	}
	greet := tools.MustNewTyped(tools.Definition{Name: "greet", Description: "Greets someone"},
		func(_ context.Context, in in) (string, error) { return "Hello, " + in.Name, nil })
	frames := modeltest.RunLoop(t, rg.Ctx, loopModel(t, rg), []*tools.Tool{greet}, "Greet Ada and Grace")
	modeltest.WantTranscript(t, modeltest.Transcript(frames), func() error { return followUp },
		"text Greeting both.",
		`TOOL_CALL call_A {"name":"Ada"}`, `TOOL_CALL call_B {"name":"Grace"}`,
		`TOOL_RESULT call_A "Hello, Ada"`, `TOOL_RESULT call_B "Hello, Grace"`,
		"text Both greeted.", "END")
}

// answerOrReject streams turns[n], or answers 400 when check finds fault
// with the follow-up (request 1).
func answerOrReject(turns []string, check func(body map[string]json.RawMessage) error, failed *error) modeltest.Handler {
	return modeltest.AnswerOrReject(turns, check, failed, func(w http.ResponseWriter, err error) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error())
	})
}

// checkLoopFollowUp checks the second request: the assistant message
// carries the calls as streamed, and one tool message per call id follows
// it, in call order.
func checkLoopFollowUp(body map[string]json.RawMessage) error {
	var msgs []chatMessage
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
	rg := newRig(t, openai.Options{}, answerOrReject([]string{turn1, turn2}, checkCutFollowUp, &followUp))
	modeltest.CheckLengthCutLoop(t, rg.Ctx, loopModel(t, rg), "call_W", func() error { return followUp })
}

// checkCutFollowUp checks the follow-up after a cut call: the assistant
// message with the call and {} arguments, then its tool message saying
// what happened.
func checkCutFollowUp(body map[string]json.RawMessage) error {
	var msgs []chatMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return err
	}
	if len(msgs) != 3 || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 || msgs[1].text() != "Writing the file." {
		return fmt.Errorf("messages %s", body["messages"])
	}
	if c := msgs[1].ToolCalls[0]; c.ID != "call_W" || c.Function.Name != "write_file" || c.Function.Arguments != "{}" {
		return fmt.Errorf("assistant call %+v", c)
	}
	tool := msgs[2]
	if tool.Role != "tool" || tool.ToolCallID != "call_W" || !strings.Contains(tool.text(), `"success":false`) ||
		!strings.Contains(tool.text(), "cut off by the length limit") || !strings.Contains(tool.text(), "smaller pieces") {
		return fmt.Errorf("tool message %+v", tool)
	}
	return nil
}

// loopModel is the spec of an adapter for a tool loop on rg's server.
func loopModel(t *testing.T, rg *modeltest.Rig) actors.Spec {
	return modeltest.Must(openai.New(&openai.Options{BaseURL: rg.URL + "/v1", HTTPClient: rg.Client, Model: "gpt-4o-mini", MaxRetries: openai.NoRetries}))(t).Spec("model")
}
