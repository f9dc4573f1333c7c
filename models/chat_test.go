package models_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// TestMessage_Encoding: each role in the OpenAI chat shape; strings are
// not HTML-escaped; an assistant message with calls and no text has null
// content; control characters and invalid UTF-8 are escaped as
// encoding/json does.
func TestMessage_Encoding(t *testing.T) {
	cases := []struct {
		m    models.Message
		want string
	}{
		{models.SystemMessage("a < b && c > d"), `{"role":"system","content":"a < b && c > d"}`},
		{models.UserMessage("say \"hi\"\n\tnow\x01"), `{"role":"user","content":"say \"hi\"\n\tnow\u0001"}`},
		{models.AssistantMessage("", models.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"x":"<1>"}`)},
			models.ToolCall{ID: "c2", Name: "g"}),
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":\"<1>\"}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}`},
		{models.AssistantMessage("done"), `{"role":"assistant","content":"done"}`},
		{models.ToolMessage("c1", json.RawMessage(`{"ok":true}`)), `{"role":"tool","content":"{\"ok\":true}","tool_call_id":"c1"}`},
		{models.UserMessage("bad \xff utf8 é"), `{"role":"user","content":"bad \ufffd utf8 é"}`},
	}
	for _, c := range cases {
		got := c.m.AppendJSON(nil)
		if string(got) != c.want {
			t.Errorf("encoded\n%s\nwant\n%s", got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("invalid JSON %s", got)
		}
		// The size is known before encoding: one allocation, no growing.
		if n := testing.AllocsPerRun(20, func() { c.m.AppendJSON(nil) }); n != 1 && !raceDetector {
			t.Errorf("%s: %v allocations, want 1", c.want, n)
		}
	}
}

// TestMessage_RoundTrip: decoding what was encoded gives the message
// back; content given as parts or null decodes to its text.
func TestMessage_RoundTrip(t *testing.T) {
	in := []models.Message{
		models.SystemMessage("be brief"),
		models.UserMessage("hi"),
		models.AssistantMessage("let me look", models.ToolCall{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}),
		models.ToolMessage("c1", json.RawMessage(`{"v":2}`)),
		models.AssistantMessage("two"),
	}
	out, err := models.DecodeMessages(models.EncodeMessages(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d messages back", len(out))
	}
	for i := range in {
		a, b := in[i], out[i]
		if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID || len(a.ToolCalls) != len(b.ToolCalls) {
			t.Fatalf("message %d: %+v back as %+v", i, a, b)
		}
		for j := range a.ToolCalls {
			if a.ToolCalls[j].ID != b.ToolCalls[j].ID || a.ToolCalls[j].Name != b.ToolCalls[j].Name ||
				string(a.ToolCalls[j].Arguments) != string(b.ToolCalls[j].Arguments) || b.ToolCalls[j].Index != j {
				t.Fatalf("message %d call %d: %+v back as %+v", i, j, a.ToolCalls[j], b.ToolCalls[j])
			}
		}
	}
	parts, err := models.DecodeMessages([]byte(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null}]`))
	if err != nil || parts[0].Content != "ab" || parts[1].Content != "" {
		t.Fatalf("parts: %+v, %v", parts, err)
	}
	if _, err := models.DecodeMessages([]byte(`[{"role":"user","content":7}]`)); err == nil {
		t.Fatal("numeric content decoded")
	}
}

// TestJoinMessages: raw elements are joined as they are.
func TestJoinMessages(t *testing.T) {
	list, err := models.SplitMessages([]byte(`[{"role":"user","content":"x"}, {"b":1}]`))
	if err != nil {
		t.Fatal(err)
	}
	list = append(list, nil)
	if got := string(models.JoinMessages(list)); got != `[{"role":"user","content":"x"},{"b":1},null]` {
		t.Fatalf("joined %s", got)
	}
}

// TestSplitMessages: the elements are those json.Unmarshal finds, with
// no copy made of them; what is not a JSON array is refused.
func TestSplitMessages(t *testing.T) {
	for _, in := range []string{
		`[]`, ` [ ] `, `null`, `[1]`, `[ 1 , "a" ,true,null, -2.5e3 ]`,
		`[{"role":"user","content":"x ] } , [ \" \\"}, {"b":[1,{"c":"]"}]}]`,
		"[\n\t{\"role\":\"tool\"}\r\n,\n[[]]\n]\n", `["\u005d"]`,
	} {
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		payload := []byte(in)
		got, err := models.SplitMessages(payload)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if (got == nil) != (want == nil) || len(got) != len(want) {
			t.Fatalf("%q: split into %q, want %q", in, got, want)
		}
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Errorf("%q: element %d is %q, want %q", in, i, got[i], want[i])
			}
			if cap(got[i]) != len(got[i]) {
				t.Errorf("%q: element %d can be appended to in place", in, i)
			}
		}
	}
	for _, in := range []string{``, `[`, `[1,]`, `{"role":"user"}`, `"x"`, `7`, `[1] [2]`, `[{"a":}]`} {
		if list, err := models.SplitMessages([]byte(in)); err == nil {
			t.Errorf("%q split into %q", in, list)
		}
	}
	payload := models.EncodeMessages([]models.Message{models.UserMessage("a"), models.AssistantMessage("b")})
	if n := testing.AllocsPerRun(20, func() { _, _ = models.SplitMessages(payload) }); n != 1 && !raceDetector {
		t.Errorf("split: %v allocations, want 1 (the list)", n)
	}
}

// TestAnswer_Rounds: text said along with calls stays with its round, the
// final answer is the last response's text, usage is summed, results are
// kept in call order, and Messages is the conversation as a loop sends it.
func TestAnswer_Rounds(t *testing.T) {
	s := "s"
	frames := []*messages.Frame{
		messages.Text(s, "Let me "), messages.Text(s, "check."),
		messages.ToolCall(s, "c1", "f", json.RawMessage(`{"a":1}`)),
		messages.ToolCall(s, "c2", "g", json.RawMessage(`{}`)),
		models.UsageFrame(s, json.RawMessage(`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)),
		models.FinishFrame(s, "tool_calls"),
		messages.ToolError(s, "c2", "g", "boom"),
		messages.RawToolResult(s, "c1", "f", json.RawMessage(`{"v":1}`)),
		messages.Text(s, "All "), messages.Text(s, "good."),
		models.UsageFrame(s, json.RawMessage(`{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}`)),
		models.FinishFrame(s, "stop"),
		messages.End(s),
	}
	var a models.Answer
	for _, f := range frames {
		a.Add(f)
	}
	if !a.Answered || a.Failed || a.Text != "All good." || a.Finish != "stop" || a.Usage != (models.Usage{10, 3, 13}) {
		t.Fatalf("answer %+v", a)
	}
	if len(a.Rounds) != 1 || a.Rounds[0].Text != "Let me check." || !a.Rounds[0].Complete() {
		t.Fatalf("rounds %+v", a.Rounds)
	}
	if ids := []string{a.Rounds[0].Results[0].CallID, a.Rounds[0].Results[1].CallID}; !slices.Equal(ids, []string{"c1", "c2"}) ||
		!a.Rounds[0].Results[1].IsError || a.ToolCalls() != 2 || a.FailedCalls() != 1 {
		t.Fatalf("results %+v", a.Rounds[0].Results)
	}
	got := string(models.EncodeMessages(a.Messages()))
	want := `[{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
		`{"role":"tool","content":"{\"v\":1}","tool_call_id":"c1"},{"role":"tool","content":"{\"success\":false,\"error\":\"boom\"}","tool_call_id":"c2"},` +
		`{"role":"assistant","content":"All good."}]`
	if got != want {
		t.Fatalf("messages\n%s\nwant\n%s", got, want)
	}
}

// TestAnswer_Failed: a stream that fails has no final answer; the text it
// streamed is not taken for one, and frames after END are ignored.
func TestAnswer_Failed(t *testing.T) {
	var a models.Answer
	for _, f := range []*messages.Frame{messages.Text("s", "half an ans"), messages.Error("s", "model died"),
		messages.End("s"), messages.Text("s", "late"), messages.Text("other", "x")} {
		a.Add(f)
	}
	if a.Answered || !a.Failed || a.Error != "model died" || a.Text != "" || !a.Ended || len(a.Messages()) != 0 {
		t.Fatalf("answer %+v", a)
	}
}
