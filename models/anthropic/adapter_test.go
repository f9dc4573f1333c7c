package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// Fixtures: streamed answers as the exact SSE bytes of the Messages API.

func event(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

func messageStart(input, cacheWrite, cacheRead int) string {
	return event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1,"service_tier":"standard"}}}`, input, cacheWrite, cacheRead))
}

var ping = event("ping", `{"type": "ping"}`)

func textStart(i int) string {
	return event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
}

func textDelta(i int, s string) string {
	return event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%q}}`, i, s))
}

func toolStart(i int, id, name string) string {
	return event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name))
}

func inputDelta(i int, piece string) string {
	return event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%q}}`, i, piece))
}

func thinkingStart(i int) string {
	return event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, i))
}

func thinkingDelta(i int, s string) string {
	return event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%q}}`, i, s))
}

func signatureDelta(i int, s string) string {
	return event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%q}}`, i, s))
}

func blockStop(i int) string {
	return event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

func messageDelta(stop string, output int) string {
	return event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, output))
}

var messageStop = event("message_stop", `{"type":"message_stop"}`)

func sse(parts ...string) string { return strings.Join(parts, "") }

type wantCall struct{ id, name, args string }

type fixture struct {
	name   string
	body   string
	text   string
	calls  []wantCall
	finish string
	usage  string // expected usage JSON, "" for any
	// truncated are the calls cut off by the length limit (args: the
	// META payload).
	truncated []wantCall
	err       string // substring of the ERROR text; "" for success
	is        error  // what the error text comes from
}

var fixtures = []fixture{
	{
		name: "parallel tool use with interleaved deltas",
		body: sse(messageStart(472, 0, 0), ping, textStart(0), textDelta(0, "Checking "), textDelta(0, "both cities."), blockStop(0),
			toolStart(1, "toolu_01A", "get_weather"), inputDelta(1, ""),
			toolStart(2, "toolu_01B", "get_weather"), inputDelta(2, ""),
			inputDelta(2, `{"city": "Lon`), inputDelta(1, `{"city":`), ping, inputDelta(2, `don"}`), blockStop(2),
			inputDelta(1, ` "Paris", "unit": "°C"}`), blockStop(1),
			messageDelta("tool_use", 89), messageStop),
		text:   "Checking both cities.",
		calls:  []wantCall{{"toolu_01A", "get_weather", `{"city":"Paris","unit":"°C"}`}, {"toolu_01B", "get_weather", `{"city":"London"}`}},
		finish: "tool_calls",
		usage:  `{"prompt_tokens":472,"completion_tokens":89,"total_tokens":561,"prompt_tokens_details":{"cached_tokens":0},"input_tokens":472,"output_tokens":89,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}`,
	},
	{
		name: "empty-input tool call",
		body: sse(messageStart(10, 0, 0), toolStart(0, "toolu_01C", "list_files"), inputDelta(0, ""), blockStop(0),
			messageDelta("tool_use", 12), messageStop),
		calls:  []wantCall{{"toolu_01C", "list_files", `{}`}},
		finish: "tool_calls",
	},
	{
		name: "usage with cache tokens",
		body: sse(messageStart(5, 20, 100), textStart(0), textDelta(0, "Cached."), blockStop(0),
			messageDelta("end_turn", 30), messageStop),
		text:   "Cached.",
		finish: "stop",
		usage:  `{"prompt_tokens":125,"completion_tokens":30,"total_tokens":155,"prompt_tokens_details":{"cached_tokens":100},"input_tokens":5,"output_tokens":30,"cache_creation_input_tokens":20,"cache_read_input_tokens":100}`,
	},
	{
		name: "max_tokens in plain text is a normal end",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "A long ans"), messageDelta("max_tokens", 5), messageStop),
		text: "A long ans", finish: "length",
	},
	{
		name: "max_tokens mid-tool-use",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Writing it."), blockStop(0),
			toolStart(1, "toolu_01D", "write_file"), inputDelta(1, ""), inputDelta(1, `{"path":"big.txt","content":"lorem ip`),
			messageDelta("max_tokens", 4096), messageStop),
		text: "Writing it.", finish: "length",
		truncated: []wantCall{{"toolu_01D", "write_file", `{"name":"write_file","received":37}`}},
	},
	{
		name: "max_tokens after a complete call",
		body: sse(messageStart(10, 0, 0), toolStart(0, "toolu_01G", "write_file"), inputDelta(0, `{"path":"a.txt","content":"A"}`), blockStop(0),
			toolStart(1, "toolu_01H", "write_file"), inputDelta(1, ""),
			messageDelta("max_tokens", 4096), messageStop),
		calls:     []wantCall{{"toolu_01G", "write_file", `{"path":"a.txt","content":"A"}`}},
		truncated: []wantCall{{"toolu_01H", "write_file", `{"name":"write_file","received":0}`}},
		finish:    "length",
	},
	{
		name: "refusal drops the calls",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "I can't help with that."), blockStop(0),
			messageDelta("refusal", 8), messageStop),
		text: "I can't help with that.", finish: "content_filter",
	},
	{
		name: "stream cut without message_stop",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Half"), blockStop(0),
			toolStart(1, "toolu_01E", "read_file"), inputDelta(1, `{"path":"a`)),
		text: "Half", err: "without message_stop", is: anthropic.ErrIncomplete,
	},
	{
		name: "cut after message_delta",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Done"), blockStop(0), messageDelta("end_turn", 2)),
		text: "Done", err: "without message_stop", is: anthropic.ErrIncomplete,
	},
	{
		name: "error event mid-stream (overloaded)",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Let me "), ping,
			event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)),
		text: "Let me ", err: "overloaded_error: Overloaded",
	},
	{
		name: "tool input that is not an object",
		body: sse(messageStart(10, 0, 0), toolStart(0, "toolu_01F", "read_file"), inputDelta(0, `["a"]`), blockStop(0),
			messageDelta("tool_use", 3), messageStop),
		err: "not a JSON object", is: anthropic.ErrInvalidToolCall,
	},
	{
		name: "delta for a block never started",
		body: sse(messageStart(10, 0, 0), inputDelta(3, `{}`)),
		err:  "not open", is: anthropic.ErrProtocol,
	},
}

// rig is an adapter talking to an httptest server, in a real runtime.
type rig struct {
	t    *testing.T
	conn *actors.Conn
	ctx  context.Context
	url  string
	http *http.Client

	mu     sync.Mutex
	bodies []map[string]json.RawMessage
}

// newRig starts a server whose n-th request is answered by handle and an
// adapter on it configured by opts.
func newRig(t *testing.T, opts anthropic.Options, handle func(n int, w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage)) *rig {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rg := &rig{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		rg.mu.Lock()
		n := len(rg.bodies)
		rg.bodies = append(rg.bodies, body)
		rg.mu.Unlock()
		handle(n, w, r, body)
	}))
	t.Cleanup(srv.Close)
	rg.url, rg.http = srv.URL, srv.Client()
	opts.BaseURL, opts.HTTPClient = rg.url, rg.http
	if opts.Model == "" {
		opts.Model = "claude-sonnet-4-5"
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = anthropic.NoRetries
	}
	m, err := anthropic.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	if rg.conn, err = modeltest.Runtime(t).Start(m.Spec("model")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	rg.ctx = ctx
	return rg
}

func (rg *rig) body(n int) map[string]json.RawMessage {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if n >= len(rg.bodies) {
		rg.t.Fatalf("server got %d requests, want at least %d", len(rg.bodies), n+1)
	}
	return rg.bodies[n]
}

// streamBody answers with SSE bytes as they are.
func streamBody(body string) func(int, http.ResponseWriter, *http.Request, map[string]json.RawMessage) {
	return func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}
}

// ask sends a request made of params and reads the answer.
func (rg *rig) ask(stream string, params ...models.Param) *models.Response {
	rg.t.Helper()
	req := &models.Request{StreamID: stream, Params: params}
	if err := rg.conn.SendAll(req.Frames()...); err != nil {
		rg.t.Fatal(err)
	}
	frames, err := rg.conn.RecvStream(rg.ctx, stream)
	if err != nil {
		rg.t.Fatalf("read answer: %v", err)
	}
	r, err := models.ReadResponse(frames)
	if err != nil {
		rg.t.Fatalf("answer breaks the contract: %v", err)
	}
	return r
}

func param(name, value string) models.Param {
	return models.Param{Name: name, Value: json.RawMessage(value)}
}

var userAsk = param(models.ParamMessages, `[{"role":"user","content":"What is the weather in Paris?"}]`)

func TestAdapter_AwkwardStreamsOverSSE(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			rg := newRig(t, anthropic.Options{}, streamBody(fx.body))
			r := rg.ask("s1", userAsk)
			if r.Text != fx.text {
				t.Errorf("text %q, want %q", r.Text, fx.text)
			}
			if fx.err != "" {
				if !r.Failed || !strings.Contains(r.Error, fx.err) || len(r.ToolCalls) != 0 || r.Finish != "" {
					t.Fatalf("failed %v %q, calls %+v, finish %q: want ERROR %q and no calls", r.Failed, r.Error, r.ToolCalls, r.Finish, fx.err)
				}
				if fx.is != nil && !strings.Contains(r.Error, fx.is.Error()) {
					t.Fatalf("error %q does not say %q", r.Error, fx.is)
				}
				return
			}
			if r.Failed {
				t.Fatalf("failed: %s", r.Error)
			}
			if len(r.ToolCalls) != len(fx.calls) {
				t.Fatalf("calls %+v, want %+v", r.ToolCalls, fx.calls)
			}
			for i, want := range fx.calls {
				got := r.ToolCalls[i]
				if got.ID != want.id || got.Name != want.name || got.Index != i || !modeltest.JSONEqual(got.Arguments, []byte(want.args)) {
					t.Errorf("call %d = %+v, want %+v", i, got, want)
				}
			}
			if len(r.Truncated) != len(fx.truncated) {
				t.Fatalf("truncated calls %+v, want %+v", r.Truncated, fx.truncated)
			}
			for i, want := range fx.truncated {
				got := r.Truncated[i]
				if got.ID != want.id || got.Name != want.name || got.Index != len(fx.calls)+i || !modeltest.JSONEqual(got.Arguments, []byte(want.args)) {
					t.Errorf("truncated call %d = %+v (%s), want %+v", i, got, got.Arguments, want)
				}
			}
			if r.Finish != fx.finish {
				t.Fatalf("finish %q, want %q", r.Finish, fx.finish)
			}
			if fx.usage != "" && !modeltest.JSONEqual(r.Usage, []byte(fx.usage)) {
				t.Fatalf("usage %s, want %s", r.Usage, fx.usage)
			}
		})
	}
}

func TestAccumulator_ErrorsAreSentinels(t *testing.T) {
	var acc anthropic.Accumulator
	if _, err := acc.Result(); !errors.Is(err, anthropic.ErrIncomplete) {
		t.Fatalf("empty stream: %v, want ErrIncomplete", err)
	}
}
