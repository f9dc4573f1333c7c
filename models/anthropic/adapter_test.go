package anthropic_test

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
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

type wantCall = modeltest.WantCall

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
		// The same holds for a cut call that is not the last: a block
		// open at max_tokens is cut, whatever it received.
		name: "max_tokens with a call open before any input, then a complete one",
		body: sse(messageStart(10, 0, 0), toolStart(0, "toolu_01L", "delete_files"),
			toolStart(1, "toolu_01M", "read_file"), inputDelta(1, `{"path":"b.txt"}`), blockStop(1),
			messageDelta("max_tokens", 4096), messageStop),
		calls:     []wantCall{{"toolu_01M", "read_file", `{"path":"b.txt"}`}},
		truncated: []wantCall{{"toolu_01L", "delete_files", `{"name":"delete_files","received":0}`}},
		finish:    "length",
	},
	{
		// A block the API stopped is whole even at max_tokens: without
		// input, it runs with {}; only the open one is cut.
		name: "max_tokens after a stopped call without input: it runs with {}",
		body: sse(messageStart(10, 0, 0), toolStart(0, "toolu_01T", "list_files"), blockStop(0),
			toolStart(1, "toolu_01U", "write_file"), inputDelta(1, `{"pa`),
			messageDelta("max_tokens", 4096), messageStop),
		calls:     []wantCall{{"toolu_01T", "list_files", `{}`}},
		truncated: []wantCall{{"toolu_01U", "write_file", `{"name":"write_file","received":4}`}},
		finish:    "length",
	},
	{
		// A cut block that cannot be named to the model (no id or no
		// name) is dropped; the whole calls and the text are kept, as
		// the OpenAI-compatible adapter keeps them.
		name: "max_tokens in a tool_use block without a name: the block is dropped, the whole calls kept",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Reading."), blockStop(0),
			toolStart(1, "toolu_01N", "read_file"), inputDelta(1, `{"path":"a.txt"}`), blockStop(1),
			toolStart(2, "toolu_01P", ""), inputDelta(2, `{"pa`),
			messageDelta("max_tokens", 4096), messageStop),
		text:   "Reading.",
		calls:  []wantCall{{"toolu_01N", "read_file", `{"path":"a.txt"}`}},
		finish: "length",
	},
	{
		// Blocks come one after the other, but an accumulator that took
		// them interleaved must still give every call one index: the
		// whole ones first, the cut ones after.
		name: "max_tokens with an open call before a complete one",
		body: sse(messageStart(10, 0, 0), toolStart(0, "toolu_01J", "write_file"), inputDelta(0, `{"path":"a.t`),
			toolStart(1, "toolu_01K", "read_file"), inputDelta(1, `{"path":"b.txt"}`), blockStop(1),
			messageDelta("max_tokens", 4096), messageStop),
		calls:     []wantCall{{"toolu_01K", "read_file", `{"path":"b.txt"}`}},
		truncated: []wantCall{{"toolu_01J", "write_file", `{"name":"write_file","received":12}`}},
		finish:    "length",
	},
	{
		name: "refusal drops the calls",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "I can't help with that."), blockStop(0),
			messageDelta("refusal", 8), messageStop),
		text: "I can't help with that.", finish: "content_filter",
	},
	{
		// A refusal stops the answer where it stands: no call of it is
		// emitted, whole, without input, or still open.
		name: "refusal drops whole and open calls",
		body: sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "No."), blockStop(0),
			toolStart(1, "toolu_01Q", "read_file"), inputDelta(1, `{"path":"a.txt"}`), blockStop(1),
			toolStart(2, "toolu_01R", "delete_files"), blockStop(2),
			toolStart(3, "toolu_01S", "write_file"), inputDelta(3, `{"pa`),
			messageDelta("refusal", 8), messageStop),
		text: "No.", finish: "content_filter",
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

// newRig starts a server whose n-th request is answered by handle and an
// adapter on it configured by opts (BaseURL, HTTPClient, the default model
// and no retries filled in).
func newRig(t *testing.T, opts anthropic.Options, handle modeltest.Handler) *modeltest.Rig {
	t.Helper()
	return modeltest.NewRig(t, handle, adapter(t, opts))
}

func adapter(t *testing.T, opts anthropic.Options) func(url string, client *http.Client) actors.Spec {
	return func(url string, client *http.Client) actors.Spec {
		opts.BaseURL, opts.HTTPClient = url, client
		opts.Model = cmp.Or(opts.Model, "claude-sonnet-4-5")
		opts.MaxRetries = cmp.Or(opts.MaxRetries, anthropic.NoRetries)
		return modeltest.Must(anthropic.New(&opts))(t).Spec("model")
	}
}

var param = modeltest.Param

var userAsk = param(models.ParamMessages, `[{"role":"user","content":"What is the weather in Paris?"}]`)

func TestAdapter_AwkwardStreamsOverSSE(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			rg := newRig(t, anthropic.Options{}, modeltest.StreamBody(fx.body))
			r := rg.Ask("s1", userAsk)
			if r.Text != fx.text {
				t.Errorf("text %q, want %q", r.Text, fx.text)
			}
			if fx.err != "" {
				says := []string{fx.err}
				if fx.is != nil {
					says = append(says, fx.is.Error())
				}
				modeltest.WantFailed(t, r, says...)
				return
			}
			if r.Failed {
				t.Fatalf("failed: %s", r.Error)
			}
			modeltest.CheckCalls(t, "call", r.ToolCalls, fx.calls, 0)
			modeltest.CheckCalls(t, "truncated call", r.Truncated, fx.truncated, len(fx.calls))
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
