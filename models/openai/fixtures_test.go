package openai_test

import (
	"fmt"
	"strings"

	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
)

// Fixtures: streamed answers as the exact SSE bytes OpenAI-compatible
// servers send, one per awkward case of WIRE-FORMATS.md.

// chunk is one chat.completion.chunk event with choices[0] carrying delta
// and finish ("" for null).
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`+"\n\n", delta, f)
}

const (
	roleChunk = `{"role":"assistant","content":null,"refusal":null}`
	done      = "data: [DONE]\n\n"
	usage     = `data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":0}}}` + "\n\n"
)

func content(s string) string { return chunk(fmt.Sprintf(`{"content":%q}`, s), "") }

// first is a call's first fragment: index, id, type, name, arguments.
func first(index int, id, name, args string) string {
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, index, id, name, args), "")
}

// args is a later fragment: index and an arguments piece only.
func args(index int, piece string) string {
	return chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%q}}]}`, index, piece), "")
}

func finish(reason string) string { return chunk(`{}`, reason) }

func sse(parts ...string) string { return strings.Join(parts, "") }

type wantCall = modeltest.WantCall

type fixture struct {
	name   string
	body   string
	text   string
	calls  []wantCall
	finish string
	usage  bool
	// truncated are the calls cut off by the length limit (args: the
	// META payload).
	truncated []wantCall
	err       error // errors.Is target; nil for success
	// errText, when set, must be in the error's text.
	errText string
}

var fixtures = []fixture{
	{
		name: "parallel calls keyed by index",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "get_weather", ""), args(0, `{"city":`), args(0, `"Paris"}`),
			first(1, "call_B", "get_time", ""), args(1, `{"tz":"Europe/`), args(1, `Paris"}`),
			finish("tool_calls"), usage, done),
		calls:  []wantCall{{"call_A", "get_weather", `{"city":"Paris"}`}, {"call_B", "get_time", `{"tz":"Europe/Paris"}`}},
		finish: "tool_calls", usage: true,
	},
	{
		name: "every parallel call at index 0 with distinct ids",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "read_file", ""), args(0, `{"path":"a.txt"}`),
			first(0, "call_B", "read_file", ""), args(0, `{"path":`), args(0, `"b.txt"}`),
			first(0, "call_C", "list_files", ""),
			finish("tool_calls"), done),
		calls:  []wantCall{{"call_A", "read_file", `{"path":"a.txt"}`}, {"call_B", "read_file", `{"path":"b.txt"}`}, {"call_C", "list_files", `{}`}},
		finish: "tool_calls",
	},
	{
		name: "index 1 starts before index 0 is finished",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "write_file", ""), args(0, `{"path":"x.go",`),
			first(1, "call_B", "run_command", ""), args(1, `{"command":`),
			args(0, `"content":"package x"}`), args(1, `"go test"}`),
			finish("tool_calls"), done),
		calls:  []wantCall{{"call_A", "write_file", `{"path":"x.go","content":"package x"}`}, {"call_B", "run_command", `{"command":"go test"}`}},
		finish: "tool_calls",
	},
	{
		name: "whole call with complete JSON in the first fragment",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "read_file", `{"path":"go.mod"}`),
			finish("tool_calls"), done),
		calls:  []wantCall{{"call_A", "read_file", `{"path":"go.mod"}`}},
		finish: "tool_calls",
	},
	{
		name: "empty arguments mean {}",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "list_files", ""),
			finish("tool_calls"), done),
		calls:  []wantCall{{"call_A", "list_files", `{}`}},
		finish: "tool_calls",
	},
	{
		// Only the length limit cuts: a call without parameters of an
		// answer that stopped (a forced tool_choice ends with "stop")
		// is whole, and runs with {}.
		name: "empty arguments mean {} with finish stop too",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "read_file", `{"path":"a.txt"}`), first(1, "call_B", "list_files", ""),
			finish("stop"), done),
		calls:  []wantCall{{"call_A", "read_file", `{"path":"a.txt"}`}, {"call_B", "list_files", `{}`}},
		finish: "stop",
	},
	{
		name: "first fragment without function.name",
		body: sse(chunk(roleChunk, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_A","type":"function","function":{"arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"name":"read_file"}}]}`, ""),
			args(0, `{"path":"a"}`),
			finish("tool_calls"), done),
		calls:  []wantCall{{"call_A", "read_file", `{"path":"a"}`}},
		finish: "tool_calls",
	},
	{
		name: "forced tool_choice ends with stop",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "read_file", ""), args(0, `{"path":"a"}`),
			finish("stop"), done),
		calls:  []wantCall{{"call_A", "read_file", `{"path":"a"}`}},
		finish: "stop",
	},
	{
		name: "text content before the tool calls",
		body: sse(chunk(roleChunk, ""), content("Let me "), content("check."),
			first(0, "call_A", "read_file", ""), args(0, `{"path":"a"}`),
			finish("tool_calls"), usage, done),
		text:   "Let me check.",
		calls:  []wantCall{{"call_A", "read_file", `{"path":"a"}`}},
		finish: "tool_calls", usage: true,
	},
	{
		name: "arguments split inside a unicode escape",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "write_file", ""), args(0, `{"content":"caf\u00`), args(0, `e9 ✓"}`),
			finish("tool_calls"), done),
		calls:  []wantCall{{"call_A", "write_file", `{"content":"café ✓"}`}},
		finish: "tool_calls",
	},
	{
		name:   "plain text answer with usage",
		body:   sse(chunk(roleChunk, ""), content("Hello"), content(", world"), finish("stop"), usage, done),
		text:   "Hello, world",
		finish: "stop", usage: true,
	},
	{
		name:   "length truncation of text is a normal end",
		body:   sse(chunk(roleChunk, ""), content("A long ans"), finish("length"), done),
		text:   "A long ans",
		finish: "length",
	},
	{
		name:   "finish reason without [DONE] is whole",
		body:   sse(chunk(roleChunk, ""), content("ok"), finish("stop")),
		text:   "ok",
		finish: "stop",
	},
	{
		name: "length truncation with an unterminated argument string",
		body: sse(chunk(roleChunk, ""), content("Writing it."),
			first(0, "call_A", "write_file", ""), args(0, `{"path":"a.txt","content":"lorem ip`),
			finish("length"), done),
		text:      "Writing it.",
		finish:    "length",
		truncated: []wantCall{{"call_A", "write_file", `{"name":"write_file","received":35}`}},
	},
	{
		name: "length after a whole call: only the cut one is truncated",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "write_file", `{"path":"a.txt","content":"A"}`),
			first(1, "call_B", "write_file", ""), args(1, `{"pa`),
			finish("length"), done),
		calls:     []wantCall{{"call_A", "write_file", `{"path":"a.txt","content":"A"}`}},
		truncated: []wantCall{{"call_B", "write_file", `{"name":"write_file","received":4}`}},
		finish:    "length",
	},
	{
		// Servers that interleave parallel calls can be cut in the middle
		// of several: the whole ones are kept and each cut one is told as
		// truncated (after the whole ones), so that every call has a result.
		name: "length with interleaved calls: every cut one is truncated, the whole one kept",
		body: sse(chunk(roleChunk, ""), content("Writing both."),
			first(0, "call_A", "write_file", ""), first(1, "call_B", "read_file", ""), first(2, "call_C", "write_file", ""),
			args(0, `{"path":"a.txt","con`), args(1, `{"path":"b.txt"}`), args(2, `{"pa`), args(0, `tent":"lor`),
			finish("length"), done),
		text:      "Writing both.",
		calls:     []wantCall{{"call_B", "read_file", `{"path":"b.txt"}`}},
		truncated: []wantCall{{"call_A", "write_file", `{"name":"write_file","received":30}`}, {"call_C", "write_file", `{"name":"write_file","received":4}`}},
		finish:    "length",
	},
	{
		// A server that interleaves can be cut after a call's first
		// fragment and before any of its arguments: nothing tells that
		// call from a whole one without parameters, so with finish
		// "length" it is cut too, never run with {} in place of its
		// arguments.
		name: "length with interleaved calls: a call with no arguments yet is truncated, not run with {}",
		body: sse(chunk(roleChunk, ""),
			first(0, "call_A", "delete_files", ""), first(1, "call_B", "read_file", ""),
			args(1, `{"path":"b.txt"}`),
			finish("length"), done),
		calls:     []wantCall{{"call_B", "read_file", `{"path":"b.txt"}`}},
		truncated: []wantCall{{"call_A", "delete_files", `{"name":"delete_files","received":0}`}},
		finish:    "length",
	},
	{
		// A call cut before its name arrived cannot be named to the
		// model: it is dropped, and the whole calls before it are kept,
		// as the Anthropic adapter keeps them. Some servers send the
		// name after the id and arguments: a call without a name is
		// dropped whole arguments or not.
		name: "length cut before a call's name: the call is dropped, the whole ones kept",
		body: sse(chunk(roleChunk, ""), content("Reading."),
			first(0, "call_A", "read_file", `{"path":"a.txt"}`),
			chunk(`{"tool_calls":[{"index":1,"id":"call_B","type":"function","function":{"arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":2,"id":"call_C","type":"function","function":{"arguments":"{}"}}]}`, ""),
			finish("length"), done),
		text:   "Reading.",
		calls:  []wantCall{{"call_A", "read_file", `{"path":"a.txt"}`}},
		finish: "length",
	},
	{
		// The content filter stops an answer where it stands, in the
		// middle of a call too: as the Anthropic adapter does on a
		// refusal, no call of it is emitted, neither one without
		// arguments (never run with {}), nor one cut before its name,
		// nor one whose arguments happen to be whole; the text is kept.
		name: "content_filter drops the calls, whole, empty, nameless or cut",
		body: sse(chunk(roleChunk, ""), content("Deleting."),
			first(0, "call_A", "read_file", `{"path":"a.txt"}`),
			first(1, "call_B", "delete_files", ""),
			chunk(`{"tool_calls":[{"index":2,"id":"call_C","type":"function","function":{"arguments":""}}]}`, ""),
			first(3, "call_D", "write_file", `{"path":"c.t`),
			finish("content_filter"), done),
		text:   "Deleting.",
		finish: "content_filter",
	},
	{
		name: "stream cut off without finish_reason and [DONE]",
		body: sse(chunk(roleChunk, ""), content("Partial"),
			first(0, "call_A", "read_file", ""), args(0, `{"path":"a.t`)),
		text: "Partial",
		err:  openai.ErrIncomplete,
	},
	{
		name: "[DONE] without a finish reason",
		body: sse(chunk(roleChunk, ""), first(0, "call_A", "read_file", `{"path":"a"}`), done),
		err:  openai.ErrIncomplete,
	},
	{
		name: "finished call with arguments that are not JSON",
		body: sse(chunk(roleChunk, ""), first(0, "call_A", "read_file", `{"path":`), finish("tool_calls"), done),
		err:  openai.ErrInvalidToolCall,
	},
	{
		// The index says which call a fragment belongs to: the two are
		// never merged, and since results are matched by id, two calls
		// with one id cannot both be answered.
		name: "two calls sharing an id at different indexes",
		body: sse(chunk(roleChunk, ""),
			first(0, "c1", "run_command", ""), args(0, `{"command":"ls"}`),
			first(1, "c1", "read_file", ""), args(1, `{"path":"a.txt"}`),
			finish("tool_calls"), done),
		err:     openai.ErrInvalidToolCall,
		errText: `calls 0 (run_command, index 0) and 1 (read_file, index 1) share the id "c1"`,
	},
}
