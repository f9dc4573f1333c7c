package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
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
	check := func(body map[string]json.RawMessage) error {
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
	frames := modeltest.RunLoop(t, rg.Ctx, loopModel(t, rg), []*tools.Tool{greet}, "Greet Ada and Grace")
	modeltest.WantTranscript(t, modeltest.Transcript(frames), func() error { return rejected },
		"text Greeting both.",
		`TOOL_CALL toolu_A {"name":"Ada"}`, `TOOL_CALL toolu_B {"name":"Grace"}`,
		`TOOL_RESULT toolu_A "Hello, Ada"`, `TOOL_RESULT toolu_B {"success":false,"error":"Grace is busy"}`,
		"text Ada greeted; Grace failed.", "END")
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
	check := func(body map[string]json.RawMessage) error {
		var msgs []anthropictest.Message
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
	modeltest.CheckLengthCutLoop(t, rg.Ctx, loopModel(t, rg), "toolu_W", func() error { return rejected })
}

// loopModel is the spec of an adapter for a tool loop on rg's server.
func loopModel(t *testing.T, rg *modeltest.Rig) actors.Spec {
	return modeltest.Must(anthropic.New(&anthropic.Options{BaseURL: rg.URL, HTTPClient: rg.Client, Model: "claude-sonnet-4-5", MaxRetries: anthropic.NoRetries}))(t).Spec("model")
}
