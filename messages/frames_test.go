package messages_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
)

func mustParam(t *testing.T, name string, v any) *messages.Frame {
	t.Helper()
	f, err := messages.Param("s1", name, v)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustResult(t *testing.T, v any) *messages.Frame {
	t.Helper()
	f, err := messages.ToolResult("s1", "call_1", "greet", v)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFrames_RoundTrip: every helper's frame survives proto marshal and
// unmarshal unchanged, and reads back the same through the readers.
func TestFrames_RoundTrip(t *testing.T) {
	restore := &messages.Frame{Type: messages.FrameType_META, StreamId: "s1",
		Meta: &messages.Metadata{Durability: &messages.Durability{WrapperId: "r1", WrapperType: "streaming-router", RestoreState: []byte{1, 2, 3}}}}
	// An empty state (a router without pending calls) still restores.
	emptyRestore := &messages.Frame{Type: messages.FrameType_META, StreamId: "s1",
		Meta: &messages.Metadata{Durability: &messages.Durability{WrapperId: "r1", RestoreState: []byte{}}}}
	notRestore := &messages.Frame{Type: messages.FrameType_META, StreamId: "s1",
		Meta: &messages.Metadata{Durability: &messages.Durability{WrapperId: "r1"}}}
	cases := []struct {
		name  string
		frame *messages.Frame
		want  string
		check func(*messages.Frame) bool
	}{
		{"param", mustParam(t, "model", "gpt"), `PARAM stream=s1 name=model payload="gpt"`, func(f *messages.Frame) bool { return f.IsParam("model") }},
		{"text", messages.Text("s1", "héllo\n"), `TEXT stream=s1 text="héllo\n"`, nil},
		{"tool call", messages.ToolCall("s1", "call_1", "greet", json.RawMessage(`{"name":"Ada"}`)), `TOOL_CALL stream=s1 id=call_1 name=greet payload={"name":"Ada"}`, nil},
		{"streaming call", messages.StreamingToolCall("s1", "call_1", "greet"), `TOOL_CALL stream=s1 id=call_1 name=greet streaming`, (*messages.Frame).IsStreamingToolCall},
		{"arg chunk", messages.ToolArgChunk("s1", "call_1", `{"na`), `TEXT stream=s1 id=call_1 tool_arg_stream text="{\"na"`, (*messages.Frame).IsToolArgChunk},
		{"complete", messages.ToolComplete("s1", "call_1"), `META stream=s1 id=call_1 tool_complete`, (*messages.Frame).IsToolComplete},
		{"result", mustResult(t, map[string]string{"greeting": "hi"}), `TOOL_RESULT stream=s1 id=call_1 name=greet payload={"greeting":"hi"}`, nil},
		{"nil result is {}", mustResult(t, nil), `TOOL_RESULT stream=s1 id=call_1 name=greet payload={}`, nil},
		{"error result", messages.ToolError("s1", "call_1", "greet", "boom"), `TOOL_RESULT stream=s1 id=call_1 name=greet is_error payload={"success":false,"error":"boom"}`, (*messages.Frame).IsErrorResult},
		{"end", messages.End("s1"), `END stream=s1`, nil},
		{"error", messages.Error("s1", "broken"), `ERROR stream=s1 text="broken"`, nil},
		{"cancel", messages.Cancel("s1", "call_1"), `CANCEL stream=s1 id=call_1`, nil},
		{"restore", restore, `META stream=s1 wrapper_id=r1 wrapper_type=streaming-router restore_state=3B`, func(f *messages.Frame) bool {
			s, ok := f.RestoreState()
			return ok && len(s) == 3
		}},
		{"empty restore", emptyRestore, `META stream=s1 wrapper_id=r1 restore_state=0B`, func(f *messages.Frame) bool {
			s, ok := f.RestoreState()
			return ok && len(s) == 0
		}},
		{"durability without restore", notRestore, `META stream=s1 wrapper_id=r1`, func(f *messages.Frame) bool {
			_, ok := f.RestoreState()
			return !ok
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wire, err := proto.Marshal(tc.frame)
			if err != nil {
				t.Fatal(err)
			}
			var back messages.Frame
			if err := proto.Unmarshal(wire, &back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(tc.frame, &back) {
				t.Fatalf("round trip changed the frame:\n got %v\nwant %v", &back, tc.frame)
			}
			// proto.Equal does not tell nil bytes from empty ones where a
			// field has no presence; the readers must agree all the same.
			_, before := tc.frame.RestoreState()
			if _, after := back.RestoreState(); after != before {
				t.Errorf("restore frame before the round trip: %v, after: %v", before, after)
			}
			if got := messages.Format(&back); got != tc.want {
				t.Errorf("Format = %s\n want %s", got, tc.want)
			}
			if tc.check != nil && !tc.check(&back) {
				t.Errorf("reader does not recognise the frame after the round trip")
			}
		})
	}
}

func TestFrame_Decode(t *testing.T) {
	f := mustParam(t, "messages", []map[string]string{{"role": "user", "content": "hi"}})
	var msgs []map[string]string
	if err := f.Decode(&msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0]["content"] != "hi" {
		t.Fatalf("decoded %v", msgs)
	}
	if err := messages.Text("s", "x").Decode(&msgs); err == nil {
		t.Fatal("decoding an empty payload succeeded")
	}
	bad := messages.ToolCall("s", "c", "t", json.RawMessage(`{"a":`))
	var v map[string]any
	if err := bad.Decode(&v); err == nil {
		t.Fatal("decoding truncated JSON succeeded")
	}
	if _, err := messages.Param("s", "bad", func() {}); err == nil {
		t.Fatal("Param accepted a value JSON cannot encode")
	}
}

func TestCloneFrame_IsDeep(t *testing.T) {
	f := messages.StreamingToolCall("s", "c", "t")
	c := messages.CloneFrame(f)
	c.Meta.Streaming = false
	if !f.GetMeta().GetStreaming() {
		t.Fatal("changing the clone changed the original")
	}
}

// TestFormat_OneLine: a frame is one line whatever its fields hold, and no
// field can pass for another or for a frame of its own. A payload with
// control characters is compacted when it is JSON (its line breaks are
// whitespace) and quoted when not; an identifier with a space, a quote or
// a control character is quoted. Ordinary frames show as they are (see
// TestFrames_RoundTrip).
func TestFormat_OneLine(t *testing.T) {
	for _, tc := range []struct {
		frame *messages.Frame
		want  string
	}{
		{messages.RawToolResult("s1", "call_1", "read_file", json.RawMessage("{\n  \"content\": \"hello\\nworld\"\n}")),
			`TOOL_RESULT stream=s1 id=call_1 name=read_file payload={"content":"hello\nworld"}`},
		{messages.RawParam("s1", "messages", json.RawMessage("[\n\t{\"role\": \"user\"}\r\n]")),
			`PARAM stream=s1 name=messages payload=[{"role":"user"}]`},
		{messages.ToolCall("s1", "call\n2", "greet", json.RawMessage(`{}`)),
			`TOOL_CALL stream=s1 id="call\n2" name=greet payload={}`},
		{messages.ToolCall("s 1", "call_1 is_error", "gr\"eet", json.RawMessage(`{"a": "b c"}`)),
			`TOOL_CALL stream="s 1" id="call_1 is_error" name="gr\"eet" payload={"a": "b c"}`},
		{messages.RawToolResult("s1", "call_1", "f", json.RawMessage("ok\nEND stream=s1")),
			`TOOL_RESULT stream=s1 id=call_1 name=f payload="ok\nEND stream=s1"`},
		{messages.RawToolResult("s1", "call_1", "f", json.RawMessage("\"a\u2028b\"")),
			`TOOL_RESULT stream=s1 id=call_1 name=f payload="\"a\u2028b\""`},
		{messages.RawToolResult("s1", "call_1", "f", json.RawMessage("\"caf\xe9\"")),
			`TOOL_RESULT stream=s1 id=call_1 name=f payload="\"caf\xe9\""`},
		{messages.Text("s1\x1b[2J", "hi"), `TEXT stream="s1\x1b[2J" text="hi"`},
		{messages.RawToolResult("s1", "call_1", "f", json.RawMessage("\"txt\u202e.exe\"")),
			`TOOL_RESULT stream=s1 id=call_1 name=f payload="\"txt\u202e.exe\""`},
		{messages.RawToolResult("s1", "call_1", "f", json.RawMessage("{\"text\": \"東京\u3000駅\"}")),
			"TOOL_RESULT stream=s1 id=call_1 name=f payload={\"text\": \"東京\u3000駅\"}"}, // a space of its own, kept
		{messages.ToolCall("s1", "call_é", "grüßen", json.RawMessage(`{"name":"Zoë"}`)),
			`TOOL_CALL stream=s1 id=call_é name=grüßen payload={"name":"Zoë"}`},
	} {
		got := messages.Format(tc.frame)
		if got != tc.want {
			t.Errorf("Format = %s\n  want %s", got, tc.want)
		}
		if strings.ContainsAny(got, "\n\r\u2028\u2029\u0085") {
			t.Errorf("Format gave more than one line: %q", got)
		}
	}
}
