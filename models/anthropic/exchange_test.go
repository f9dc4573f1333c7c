package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// answerOrReject streams turns[n], or answers 400 with the error of check
// when it finds fault with the follow-up (request 1).
func answerOrReject(turns []string, check func(body map[string]json.RawMessage) error, failed *error) modeltest.Handler {
	return modeltest.AnswerOrReject(turns, check, failed, func(w http.ResponseWriter, err error) {
		anthropictest.WriteError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
	})
}

// TestAdapter_ThinkingAndToolUseRoundTrip: the model thinks, then calls a
// tool; the adapter hands the signed thinking block out in a META frame;
// the follow-up sends it back in the assistant message (thinking_blocks),
// and the server checks the API's rule: the assistant turn starts with the
// thinking block, signature intact, before its tool_use, and the next user
// turn starts with the tool_result (is_error for a failed result).
func TestAdapter_ThinkingAndToolUseRoundTrip(t *testing.T) {
	turn1 := sse(messageStart(50, 0, 0), thinkingStart(0), thinkingDelta(0, "The user wants the weather; "), thinkingDelta(0, "I should call the tool."),
		signatureDelta(0, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"), blockStop(0),
		toolStart(1, "toolu_01T", "get_weather"), inputDelta(1, ""), inputDelta(1, `{"city":"Paris"}`), blockStop(1),
		messageDelta("tool_use", 60), messageStop)
	turn2 := sse(messageStart(80, 0, 0), textStart(0), textDelta(0, "The weather service failed."), blockStop(0), messageDelta("end_turn", 9), messageStop)
	var rejected error
	check := func(body map[string]json.RawMessage) error {
		var msgs []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(body["messages"], &msgs); err != nil {
			return err
		}
		if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[2].Role != "user" || len(msgs[1].Content) != 2 {
			return fmt.Errorf("turns %s", body["messages"])
		}
		want := `{"type":"thinking","thinking":"The user wants the weather; I should call the tool.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}`
		if !modeltest.JSONEqual(msgs[1].Content[0], []byte(want)) {
			return fmt.Errorf("assistant turn starts with %s, want the thinking block", msgs[1].Content[0])
		}
		if !modeltest.JSONEqual(msgs[1].Content[1], []byte(`{"type":"tool_use","id":"toolu_01T","name":"get_weather","input":{"city":"Paris"}}`)) {
			return fmt.Errorf("assistant tool_use %s", msgs[1].Content[1])
		}
		if !modeltest.JSONEqual(msgs[2].Content[0], []byte(`{"type":"tool_result","tool_use_id":"toolu_01T","content":"{\"success\":false,\"error\":\"service down\"}","is_error":true}`)) {
			return fmt.Errorf("tool_result %s", msgs[2].Content[0])
		}
		return nil
	}
	rg := newRig(t, anthropic.Options{}, answerOrReject([]string{turn1, turn2}, check, &rejected))
	tools := param(models.ParamTools, `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
	thinking := param("thinking", `{"type":"enabled","budget_tokens":2048}`)

	req := &models.Request{StreamID: "s1", Params: []models.Param{userAsk, tools, thinking}}
	if err := rg.Conn.SendAll(req.Frames()...); err != nil {
		t.Fatal(err)
	}
	frames, err := rg.Conn.RecvStream(rg.Ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var blocks json.RawMessage
	for _, f := range frames {
		if f.GetType() == messages.FrameType_META && f.GetName() == anthropic.MetaThinking {
			blocks = f.GetPayload()
		}
	}
	r, err := models.ReadResponse(frames)
	if err != nil || r.Failed || len(r.ToolCalls) != 1 || r.Text != "" {
		t.Fatalf("first turn %+v (%v)", r, err)
	}
	if blocks == nil {
		t.Fatal("no META thinking_blocks frame")
	}
	if !modeltest.JSONEqual(rg.Body(0)["thinking"], []byte(`{"type":"enabled","budget_tokens":2048}`)) {
		t.Fatalf("thinking param reached the server as %s", rg.Body(0)["thinking"])
	}

	c := r.ToolCalls[0]
	assistant, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "thinking_blocks": blocks,
		"tool_calls": []any{map[string]any{"id": c.ID, "type": "function", "function": map[string]string{"name": c.Name, "arguments": string(c.Arguments)}}}})
	failed := messages.ToolError("s1", c.ID, c.Name, "service down")
	tool, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.ID, "content": string(failed.GetPayload())})
	conv := fmt.Sprintf(`[{"role":"user","content":"What is the weather in Paris?"},%s,%s]`, assistant, tool)
	r = rg.Ask("s1", param(models.ParamMessages, conv), tools, thinking)
	if rejected != nil {
		t.Fatalf("server rejected the follow-up: %v", rejected)
	}
	if r.Failed || r.Text != "The weather service failed." || r.Finish != "stop" {
		t.Fatalf("second turn %+v", r)
	}
}

// TestAdapter_RequestTranslation checks the Messages API body the adapter
// writes from a chat-format request.
func TestAdapter_RequestTranslation(t *testing.T) {
	done := sse(messageStart(1, 0, 0), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn", 1), messageStop)
	rg := newRig(t, anthropic.Options{MaxTokens: 1000}, func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) {
		modeltest.StreamBody(done)(n, w, r, body)
	})
	conv := `[{"role":"system","content":"You are terse."},
		{"role":"user","content":[{"type":"text","text":"Read a and b"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},
		{"role":"assistant","content":"Reading.","tool_calls":[
			{"id":"toolu_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},
			{"id":"toolu_b","type":"function","function":{"name":"read_file","arguments":""}}]},
		{"role":"tool","tool_call_id":"toolu_a","content":"{\"content\":\"A\"}"},
		{"role":"tool","tool_call_id":"toolu_b","content":"{\"success\":false,\"error\":\"no such file\"}"},
		{"role":"user","content":"Thanks"},
		{"role":"system","content":"Answer directly."}]`
	tools := `[{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},
		{"type":"function","function":{"name":"now"}}]`
	for _, tc := range []struct {
		name   string
		params []models.Param
		want   map[string]string
	}{
		{"translation", []models.Param{param(models.ParamMessages, conv), param(models.ParamTools, tools), param(models.ParamToolChoice, `"required"`),
			param("temperature", `0.3`), param("stop", `"END"`), param("seed", `7`), param("stream_options", `{"include_usage":true}`)},
			map[string]string{
				"model":      `"claude-sonnet-4-5"`,
				"max_tokens": `1000`,
				"stream":     `true`,
				"system":     `[{"type":"text","text":"You are terse."},{"type":"text","text":"Answer directly."}]`,
				"messages": `[{"role":"user","content":[{"type":"text","text":"Read a and b"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
					{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_a","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"toolu_b","name":"read_file","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"{\"content\":\"A\"}"},{"type":"tool_result","tool_use_id":"toolu_b","content":"{\"success\":false,\"error\":\"no such file\"}","is_error":true},{"type":"text","text":"Thanks"}]}]`,
				"tools": `[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
					{"name":"now","input_schema":{"type":"object","properties":{}}}]`,
				"tool_choice":    `{"type":"any"}`,
				"temperature":    `0.3`,
				"stop_sequences": `["END"]`,
			}},
		{"named tool, no parallel calls", []models.Param{userAsk, param(models.ParamTools, tools),
			param(models.ParamToolChoice, `{"type":"function","function":{"name":"now"}}`), param("parallel_tool_calls", `false`),
			param("model", `"claude-opus-4-1"`), param("max_tokens", `64`)},
			map[string]string{"tool_choice": `{"type":"tool","name":"now","disable_parallel_tool_use":true}`, "model": `"claude-opus-4-1"`, "max_tokens": `64`}},
		{"no tools: no tool_choice", []models.Param{userAsk, param(models.ParamTools, `[]`), param(models.ParamToolChoice, `"auto"`)},
			map[string]string{"tools": "", "tool_choice": ""}},
		{"none", []models.Param{userAsk, param(models.ParamTools, tools), param(models.ParamToolChoice, `"none"`)},
			map[string]string{"tool_choice": `{"type":"none"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := rg.Requests()
			if r := rg.Ask("s-"+tc.name, tc.params...); r.Failed {
				t.Fatalf("failed: %s", r.Error)
			}
			body := rg.Body(n)
			for field, want := range tc.want {
				got, ok := body[field]
				if want == "" {
					if ok {
						t.Errorf("%s = %s, want none", field, got)
					}
					continue
				}
				if !modeltest.JSONEqual(got, []byte(want)) {
					t.Errorf("%s =\n %s\nwant\n %s", field, got, want)
				}
			}
			for _, dropped := range []string{"seed", "stream_options", "stop", "parallel_tool_calls"} {
				if _, ok := body[dropped]; ok {
					t.Errorf("OpenAI-only field %s reached the server", dropped)
				}
			}
		})
	}
}

func TestAdapter_RequestsItCannotSend(t *testing.T) {
	rg := newRig(t, anthropic.Options{}, modeltest.StreamBody(""))
	for _, tc := range []struct {
		name   string
		params []models.Param
		want   string
	}{
		{"no messages", nil, anthropic.ErrNoMessages.Error()},
		{"orphan tool message", []models.Param{param(models.ParamMessages, `[{"role":"tool","tool_call_id":"x","content":"1"}]`)}, "which no assistant message called"},
		{"unknown role", []models.Param{param(models.ParamMessages, `[{"role":"robot","content":"1"}]`)}, `role "robot"`},
		{"bad tool_choice", []models.Param{userAsk, param(models.ParamTools, `[{"type":"function","function":{"name":"f"}}]`), param(models.ParamToolChoice, `"sometimes"`)}, "tool_choice"},
		// JSON between systems is UTF-8: such bytes would be sent as
		// they are (a 400 that does not say where) or replaced unsaid.
		{"messages not UTF-8", []models.Param{param(models.ParamMessages, "[{\"role\":\"user\",\"content\":\"caf\xe9\"}]")}, `param "messages" is not valid JSON: it holds bytes that are not UTF-8`},
		{"system not UTF-8", []models.Param{userAsk, param("system", "\"caf\xe9\"")}, `param "system" is not valid JSON: it holds bytes that are not UTF-8`},
		// json.Marshal would send such a name changed (\xe9 as U+FFFD).
		{"name not UTF-8", []models.Param{userAsk, param("caf\xe9", "1")}, `param "caf\xe9": its name is not UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rg.Ask("s-"+tc.name, tc.params...)
			if !r.Failed || !containsAll(r.Error, tc.want) || r.ErrorKind != models.FailurePermanent {
				t.Fatalf("error %q of kind %q, want a permanent one saying %q", r.Error, r.ErrorKind, tc.want)
			}
		})
	}
	if n := rg.Requests(); n != 0 {
		t.Fatalf("server got %d requests, want none", n)
	}
}

func TestAdapter_HTTPErrorSaysWhy(t *testing.T) {
	rg := newRig(t, anthropic.Options{}, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		anthropictest.WriteError(w, http.StatusBadRequest, "invalid_request_error", "messages.1.content.0: unexpected tool_use_id")
	})
	r := rg.Ask("s1", userAsk)
	if !r.Failed || !containsAll(r.Error, "HTTP 400", "invalid_request_error", "unexpected tool_use_id") {
		t.Fatalf("error %q", r.Error)
	}
	if r.ErrorKind != models.FailurePermanent {
		t.Fatalf("a rejected request's error is of kind %q, want permanent", r.ErrorKind)
	}
}

// TestAdapter_OverloadIsNotPermanent: an error status worth another
// attempt ends the response with an ERROR of no kind.
func TestAdapter_OverloadIsNotPermanent(t *testing.T) {
	rg := newRig(t, anthropic.Options{MaxRetries: anthropic.NoRetries}, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		anthropictest.WriteError(w, 529, "overloaded_error", "Overloaded")
	})
	if r := rg.Ask("s1", userAsk); !r.Failed || r.ErrorKind != "" {
		t.Fatalf("failed %v with %q of kind %q, want a failure of no kind", r.Failed, r.Error, r.ErrorKind)
	}
}

func TestAdapter_APIKeyComesOnlyFromOptions(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "from-env")
	done := sse(messageStart(1, 0, 0), messageDelta("end_turn", 1), messageStop)
	rg := newRig(t, anthropic.Options{APIKey: "sk-ant-test"}, func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) {
		// The SDK sends the key as a bearer token.
		if got := r.Header.Get("Authorization") + r.Header.Get("x-api-key"); got != "Bearer sk-ant-test" {
			anthropictest.WriteError(w, http.StatusUnauthorized, "authentication_error", "credentials "+got)
			return
		}
		if r.Header.Get("anthropic-version") == "" {
			anthropictest.WriteError(w, http.StatusBadRequest, "invalid_request_error", "no anthropic-version")
			return
		}
		modeltest.StreamBody(done)(n, w, r, body)
	})
	if r := rg.Ask("s1", userAsk); r.Failed {
		t.Fatal(r.Error)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestAdapter_RetryWaitIsNotIdle: the SDK's wait before a retry (here the
// 2.5 s a retry-after-ms asks for) has nothing on the wire: it does not
// count against an idle bound shorter than it, as the waits of a
// resilience.Transport do not. The clock is the bubble's: the wait takes
// no real time, and the bound is not met by a slow machine.
func TestAdapter_RetryWaitIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := sse(messageStart(1, 0, 0), textStart(0), textDelta(0, "fine"), blockStop(0), messageDelta("end_turn", 1), messageStop)
		start := time.Now()
		rg := modeltest.NewMemRig(t, func(n int, w http.ResponseWriter, r *http.Request, b map[string]json.RawMessage) {
			if n == 0 {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("retry-after-ms", "2500")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},"request_id":"req_1"}`)
				return
			}
			modeltest.StreamBody(ok)(n, w, r, b)
		}, adapter(t, anthropic.Options{MaxRetries: 1, IdleTimeout: time.Second}))
		if r := rg.Ask("s1", userAsk); r.Failed || r.Text != "fine" || rg.Requests() != 2 {
			t.Fatalf("answer %+v after %d requests, want success on the retry", r, rg.Requests())
		}
		if waited := time.Since(start); waited < 2500*time.Millisecond {
			t.Fatalf("answered after %v, want after the 2.5 s the server asked to wait", waited)
		}
	})
}
