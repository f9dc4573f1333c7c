package openai_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
)

// newRig starts a server whose n-th request is answered by handle and an
// adapter on it configured by opts (BaseURL, HTTPClient and the default
// model are filled in).
func newRig(t *testing.T, opts openai.Options, handle modeltest.Handler) *modeltest.Rig {
	t.Helper()
	return modeltest.NewRig(t, handle, adapter(t, opts))
}

func adapter(t *testing.T, opts openai.Options) func(url string, client *http.Client) actors.Spec {
	return func(url string, client *http.Client) actors.Spec {
		opts.BaseURL, opts.HTTPClient = url+"/v1", client
		opts.Model = cmp.Or(opts.Model, "gpt-4o-mini")
		return modeltest.Must(openai.New(&opts))(t).Spec("model")
	}
}

var param = modeltest.Param

var userAsk = param(models.ParamMessages, `[{"role":"user","content":"What is the weather in Paris?"}]`)

func TestAdapter_AwkwardCasesOverSSE(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, modeltest.StreamBody(fx.body))
			r := rg.Ask("s1", userAsk)
			if r.Text != fx.text {
				t.Errorf("text %q, want %q", r.Text, fx.text)
			}
			if fx.err != nil {
				modeltest.WantFailed(t, r, fx.err.Error(), fx.errText)
				return
			}
			if r.Failed {
				t.Fatalf("failed: %s", r.Error)
			}
			checkCalls(t, r.ToolCalls, fx.calls)
			modeltest.CheckCalls(t, "truncated call", r.Truncated, fx.truncated, len(fx.calls))
			for _, c := range r.ToolCalls {
				if c.Streamed {
					t.Errorf("call %s was streamed; the adapter emits atomic calls", c.ID)
				}
			}
			if r.Finish != fx.finish || (r.Usage != nil) != fx.usage {
				t.Fatalf("finish %q usage %s, want %q usage %v", r.Finish, r.Usage, fx.finish, fx.usage)
			}
		})
	}
}

// TestAdapter_MultiTurnExchange plays a whole tool exchange: the model
// calls two tools in parallel (both at index 0), the test answers as a
// tool loop would, and the server checks the follow-up it receives.
func TestAdapter_MultiTurnExchange(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`
	turn1 := sse(chunk(roleChunk, ""), content("Reading both."),
		first(0, "call_A", "read_file", ""), args(0, `{"path":`), args(0, `"a.txt"}`),
		first(0, "call_B", "read_file", `{"path":"b.txt"}`),
		finish("tool_calls"), usage, done)
	turn2 := sse(chunk(roleChunk, ""), content("a says 1, b says 2."), finish("stop"), usage, done)
	var followUp error
	rg := newRig(t, openai.Options{}, answerOrReject([]string{turn1, turn2}, checkFollowUp, &followUp))
	conversation := []json.RawMessage{json.RawMessage(`{"role":"user","content":"Compare a.txt and b.txt"}`)}
	messagesParam := func() models.Param {
		b, _ := json.Marshal(conversation)
		return models.Param{Name: models.ParamMessages, Value: b}
	}
	r := rg.Ask("s1", messagesParam(), param(models.ParamTools, tools), param(models.ParamToolChoice, `"auto"`))
	if r.Failed || len(r.ToolCalls) != 2 || r.Text != "Reading both." {
		t.Fatalf("first turn: %+v", r)
	}

	// The loop's part: the assistant message exactly as accumulated, then
	// one tool message per call id, in call order; results go back as
	// TOOL_RESULT frames too (informational for the adapter).
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	assistant := struct {
		Role      string  `json:"role"`
		Content   *string `json:"content"`
		ToolCalls []call  `json:"tool_calls"`
	}{Role: "assistant"}
	for _, c := range r.ToolCalls {
		assistant.ToolCalls = append(assistant.ToolCalls, call{ID: c.ID, Type: "function", Function: fn{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	b, _ := json.Marshal(assistant)
	conversation = append(conversation, b)
	for i, c := range r.ToolCalls {
		result := fmt.Sprintf(`{"content":"%d"}`, i+1)
		if err := rg.Conn.Send(messages.RawToolResult("s1", c.ID, c.Name, json.RawMessage(result))); err != nil {
			t.Fatal(err)
		}
		tm, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.ID, "content": result})
		conversation = append(conversation, tm)
	}
	r = rg.Ask("s1", messagesParam(), param(models.ParamTools, tools), param(models.ParamToolChoice, `"auto"`))
	if followUp != nil {
		t.Fatalf("server rejected the follow-up: %v", followUp)
	}
	if r.Failed || r.Text != "a says 1, b says 2." || r.Finish != "stop" || len(r.ToolCalls) != 0 {
		t.Fatalf("second turn: %+v", r)
	}
	if rg.Requests() != 2 {
		t.Fatalf("server got %d requests, want 2", rg.Requests())
	}
}

// chatMessage is a message of a Chat Completions request body as a
// server reads it.
type chatMessage struct {
	Role       string           `json:"role"`
	Content    *json.RawMessage `json:"content"`
	ToolCallID string           `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text is the message's content when it is a string, else "".
func (m chatMessage) text() string {
	var s string
	if m.Content != nil {
		_ = json.Unmarshal(*m.Content, &s)
	}
	return s
}

// checkFollowUp is the server's check of the second request: the
// assistant tool_calls as streamed, then one tool message per call id, in
// order; and the request fields the adapter adds.
func checkFollowUp(body map[string]json.RawMessage) error {
	var msgs []chatMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	if len(msgs) != 4 {
		return fmt.Errorf("got %d messages, want user, assistant, tool, tool", len(msgs))
	}
	a := msgs[1]
	if a.Role != "assistant" || (a.Content != nil && string(*a.Content) != "null") || len(a.ToolCalls) != 2 {
		return fmt.Errorf("assistant message %+v", a)
	}
	wantArgs := []string{`{"path":"a.txt"}`, `{"path":"b.txt"}`}
	for i, id := range []string{"call_A", "call_B"} {
		c := a.ToolCalls[i]
		if c.ID != id || c.Type != "function" || c.Function.Name != "read_file" || c.Function.Arguments != wantArgs[i] {
			return fmt.Errorf("assistant tool_calls[%d] = %+v", i, c)
		}
		if m := msgs[2+i]; m.Role != "tool" || m.ToolCallID != id {
			return fmt.Errorf("message %d = %s/%s, want the tool message of %s", 2+i, m.Role, m.ToolCallID, id)
		}
	}
	for field, want := range map[string]string{"model": `"gpt-4o-mini"`, "stream": `true`, "stream_options": `{"include_usage":true}`, "tool_choice": `"auto"`} {
		if !modeltest.JSONEqual(body[field], []byte(want)) {
			return fmt.Errorf("%s = %s, want %s", field, body[field], want)
		}
	}
	return nil
}

func TestAdapter_RetriesOn429(t *testing.T) {
	ok := sse(content("fine"), finish("stop"), done)
	rg := newRig(t, openai.Options{MaxRetries: 2}, tooManyRequestsFirst("1", ok))
	wantRetried(t, rg)
}

func TestAdapter_HTTPErrorEndsWithError(t *testing.T) {
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"model is loading","type":"server_error"}}`)
	})
	r := rg.Ask("s1", userAsk)
	if !r.Failed || !strings.Contains(r.Error, "503") || !strings.Contains(r.Error, "model is loading") || rg.Requests() != 1 {
		t.Fatalf("failed %v with %q after %d requests", r.Failed, r.Error, rg.Requests())
	}
}

// A 200 that is not an event stream (a proxy's sign-in page, a server
// that ignored "stream": true) is reported as what it is, with the start
// of the body, not as a stream cut off.
func TestAdapter_NotAnEventStream(t *testing.T) {
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, modeltest.SignInPage())
	modeltest.WantNotEventStream(t, rg.Ask("s1", userAsk), openai.ErrNotEventStream, openai.ErrIncomplete)
}

// The event-stream media type with parameters is an event stream.
func TestAdapter_EventStreamWithParameters(t *testing.T) {
	rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "Text/Event-Stream; charset=utf-8")
		_, _ = io.WriteString(w, sse(content("fine"), finish("stop"), done))
	})
	if r := rg.Ask("s1", userAsk); r.Failed || r.Text != "fine" {
		t.Fatalf("answer %+v", r)
	}
}

// TestAdapter_RefusalsArePermanent: an error status that a new attempt
// would get again (the key, the model, the request refused) ends the
// response with an ERROR of kind models.FailurePermanent; one worth
// another attempt does not, nor does a request that could not be sent
// with a kind other than permanent.
func TestAdapter_RefusalsArePermanent(t *testing.T) {
	for status, permanent := range map[int]bool{http.StatusUnauthorized: true, http.StatusNotFound: true,
		http.StatusBadRequest: true, http.StatusServiceUnavailable: false, http.StatusTooManyRequests: false} {
		rg := newRig(t, openai.Options{MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error":{"message":"refused","type":"some_error"}}`)
		})
		r := rg.Ask("s1", userAsk)
		if got := r.ErrorKind == models.FailurePermanent; !r.Failed || got != permanent {
			t.Errorf("HTTP %d: failed %v, kind %q, want permanent %v", status, r.Failed, r.ErrorKind, permanent)
		}
	}
	rg := newRig(t, openai.Options{}, modeltest.StreamBody(""))
	if r := rg.Ask("s1"); !r.Failed || r.ErrorKind != models.FailurePermanent {
		t.Errorf("a request it cannot send: failed %v, kind %q, want permanent", r.Failed, r.ErrorKind)
	}
}

func TestAdapter_APIKeyComesOnlyFromOptions(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "from-env")
	ok := sse(content("x"), finish("stop"), done)
	for _, key := range []string{"", "sk-test"} {
		rg := newRig(t, openai.Options{APIKey: key}, modeltest.StreamBody(ok))
		rg.Ask("s1", userAsk)
		got := rg.Header(0).Get("Authorization")
		if want := map[string]string{"": "", "sk-test": "Bearer sk-test"}[key]; got != want {
			t.Errorf("APIKey %q: Authorization %q, want %q", key, got, want)
		}
	}
	if v, err := openai.APIKeyFromEnv(""); err != nil || v != "from-env" {
		t.Fatalf("APIKeyFromEnv = %q, %v", v, err)
	}
	if _, err := openai.APIKeyFromEnv("POLYWEAVE_TEST_UNSET_KEY"); !errors.Is(err, openai.ErrNoAPIKey) {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestAdapter_RequestBody(t *testing.T) {
	ok := sse(content("x"), finish("stop"), done)
	rg := newRig(t, openai.Options{DisableUsage: true}, modeltest.StreamBody(ok))
	rg.Ask("s1", userAsk, param("model", `"llama3.2"`), param("temperature", `0`), param("temperature", `0.7`),
		param("tools", `[]`), param("tool_choice", `"auto"`), param("parallel_tool_calls", `false`), param("stream", `false`), param("seed", `42`))
	body := rg.Body(0)
	for field, want := range map[string]string{"model": `"llama3.2"`, "temperature": `0.7`, "stream": `true`, "seed": `42`} {
		if !modeltest.JSONEqual(body[field], []byte(want)) {
			t.Errorf("%s = %s, want %s", field, body[field], want)
		}
	}
	for _, field := range []string{"tools", "tool_choice", "parallel_tool_calls", "stream_options"} {
		if v, ok := body[field]; ok {
			t.Errorf("%s = %s, want it left out", field, v)
		}
	}
}

func TestAdapter_RequestsItCannotSend(t *testing.T) {
	rg := newRig(t, openai.Options{Model: "m"}, modeltest.StreamBody(""))
	if r := rg.Ask("s1"); !r.Failed || r.Error != openai.ErrNoMessages.Error() {
		t.Fatalf("no messages: %+v", r)
	}
	if r := rg.Ask("s2", param("messages", `[{"role":`)); !r.Failed || !strings.Contains(r.Error, "not valid JSON") {
		t.Fatalf("bad JSON: %+v", r)
	}
	if rg.Requests() != 0 {
		t.Fatalf("server got %d requests", rg.Requests())
	}
	m, err := openai.New(&openai.Options{BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := openai.New(&openai.Options{Timeout: -time.Second}); err == nil {
		t.Fatal("negative timeout accepted")
	}
}

// A PARAM whose JSON holds bytes that are not UTF-8 is refused before
// sending, saying which: JSON between systems is UTF-8, and servers
// answer such a body with a 400 that does not say where.
func TestAdapter_ParamNotUTF8IsRefused(t *testing.T) {
	rg := newRig(t, openai.Options{}, modeltest.StreamBody(sse(content("x"), finish("stop"), done)))
	r := rg.Ask("s1", param(models.ParamMessages, "[{\"role\":\"user\",\"content\":\"caf\xe9\"}]"))
	if !r.Failed || !containsAll(r.Error, `param "messages"`, "UTF-8") || r.ErrorKind != models.FailurePermanent {
		t.Fatalf("failed %v with %q of kind %q, want a permanent error naming the param", r.Failed, r.Error, r.ErrorKind)
	}
	if n := rg.Requests(); n != 0 {
		t.Fatalf("server got %d requests, want none", n)
	}
}

// A PARAM whose name is not UTF-8 is refused before sending, saying
// which: JSON would send the name changed (the byte as U+FFFD).
func TestAdapter_ParamNameNotUTF8IsRefused(t *testing.T) {
	rg := newRig(t, openai.Options{}, modeltest.StreamBody(sse(content("x"), finish("stop"), done)))
	r := rg.Ask("s1", userAsk, param("caf\xe9", "1"))
	if !r.Failed || !containsAll(r.Error, `param "caf\xe9": its name is not UTF-8`) || r.ErrorKind != models.FailurePermanent {
		t.Fatalf("failed %v with %q of kind %q, want a permanent error naming the param", r.Failed, r.Error, r.ErrorKind)
	}
	if n := rg.Requests(); n != 0 {
		t.Fatalf("server got %d requests, want none", n)
	}
}

func TestAdapter_StalledStreamTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rg := modeltest.NewMemRig(t, func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, content("thinking"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, adapter(t, openai.Options{IdleTimeout: time.Second}))
		defer close(release)
		r := rg.Ask("s1", userAsk)
		if !r.Failed || !strings.Contains(r.Error, "no data from the server") || r.Text != "thinking" {
			t.Fatalf("failed %v with %q, text %q", r.Failed, r.Error, r.Text)
		}
	})
}

// The SDK's wait before a retry (here the 2.5 s a Retry-After-Ms asks
// for) has nothing on the wire: it does not count against an idle bound
// shorter than it, as the waits of a resilience.Transport do not. The
// clock is the bubble's: the wait takes no real time, and the bound is
// not met by a slow machine.
func TestAdapter_RetryWaitIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := sse(content("fine"), finish("stop"), done)
		start := time.Now()
		rg := modeltest.NewMemRig(t, tooManyRequestsFirst("2500", ok), adapter(t, openai.Options{MaxRetries: 1, IdleTimeout: time.Second}))
		wantRetried(t, rg)
		if waited := time.Since(start); waited < 2500*time.Millisecond {
			t.Fatalf("answered after %v, want after the 2.5 s the server asked to wait", waited)
		}
	})
}

// tooManyRequestsFirst answers the first request with HTTP 429 asking
// to wait retryAfterMs, and the others with body.
func tooManyRequestsFirst(retryAfterMs, body string) modeltest.Handler {
	return func(n int, w http.ResponseWriter, r *http.Request, b map[string]json.RawMessage) {
		if n == 0 {
			w.Header().Set("Retry-After-Ms", retryAfterMs)
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
			return
		}
		modeltest.StreamBody(body)(n, w, r, b)
	}
}

// wantRetried asks rg and checks the answer is "fine", on the second
// request.
func wantRetried(t *testing.T, rg *modeltest.Rig) {
	t.Helper()
	if r := rg.Ask("s1", userAsk); r.Failed || r.Text != "fine" || rg.Requests() != 2 {
		t.Fatalf("answer %+v after %d requests, want success on the retry", r, rg.Requests())
	}
}
