package tools

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// TestJoinRound_AsAppendRoundThenJoin: the follow-up built with its round
// is what appending the round and joining the list gives (with the final
// system message after it, which the list does not keep), and every
// element of the list is then a slice of the payload.
func TestJoinRound_AsAppendRoundThenJoin(t *testing.T) {
	calls := []*messages.Frame{
		messages.ToolCall("s", "c1", "f", json.RawMessage(`{"a":"<\"x\">"}`)),
		messages.ToolCall("s", "c2", "g", nil),
	}
	results := []*messages.Frame{
		messages.RawToolResult("s", "c1", "f", json.RawMessage(`{"ok":true}`)),
		messages.ToolError("s", "c2", "g", "no\nway"),
	}
	first := models.EncodeMessages([]models.Message{models.UserMessage("go"), models.AssistantMessage("é")})
	for _, c := range []struct {
		name     string
		text     string
		thinking json.RawMessage
		final    json.RawMessage
		extra    []json.RawMessage
	}{
		{name: "plain"},
		{name: "text, thinking and final", text: "let me\tsee", thinking: json.RawMessage(`[{"t":1}]`),
			final: systemMessage("answer now")},
		{name: "an empty element", extra: []json.RawMessage{nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			split, err := models.SplitMessages(first)
			if err != nil {
				t.Fatal(err)
			}
			split = append(split, c.extra...)
			want := appendRound(slices.Clone(split), c.text, calls, results, c.thinking)
			wantPayload := want
			if c.final != nil {
				wantPayload = append(slices.Clip(want), c.final)
			}
			payload, got := joinRound(split, c.text, calls, results, c.thinking, c.final)
			if string(payload) != string(models.JoinMessages(wantPayload)) {
				t.Errorf("payload\n%s\nwant\n%s", payload, models.JoinMessages(wantPayload))
			}
			if !json.Valid(payload) {
				t.Errorf("payload is not JSON: %s", payload)
			}
			if len(got) != len(want) {
				t.Fatalf("%d messages, want %d", len(got), len(want))
			}
			start, end := uintptr(unsafe.Pointer(unsafe.SliceData(payload))), uintptr(unsafe.Pointer(unsafe.SliceData(payload)))+uintptr(len(payload))
			for i, m := range got {
				wantM := string(want[i])
				if len(want[i]) == 0 {
					wantM = "null"
				}
				if string(m) != wantM {
					t.Errorf("message %d: %s, want %s", i, m, wantM)
				}
				if p := uintptr(unsafe.Pointer(unsafe.SliceData(m))); p < start || p+uintptr(len(m)) > end || cap(m) != len(m) {
					t.Errorf("message %d is not a capped slice of the payload", i)
				}
			}
		})
	}
}

// TestJoinRound_OneAllocation: a round's follow-up is one allocation, the
// payload, however long the results (a result's text is not copied to be
// encoded) when the list has room for the round's messages.
func TestJoinRound_OneAllocation(t *testing.T) {
	long := json.RawMessage(`{"text":"` + strings.Repeat("x", 200) + `"}`)
	calls := []*messages.Frame{messages.ToolCall("s", "c1", "f", json.RawMessage(`{}`)), messages.ToolCall("s", "c2", "f", nil)}
	results := []*messages.Frame{messages.RawToolResult("s", "c1", "f", long), messages.RawToolResult("s", "c2", "f", long)}
	user := models.UserMessage("go").AppendJSON(nil)
	list := make([]json.RawMessage, 0, 8)
	var payload json.RawMessage
	n := testing.AllocsPerRun(50, func() {
		payload, list = joinRound(append(list[:0], user), "", calls, results, nil, nil)
	})
	if len(list) != 4 || !json.Valid(payload) {
		t.Fatalf("%d messages, payload %s", len(list), payload)
	}
	if n != 1 && !raceDetector {
		t.Errorf("a round's follow-up allocates %.0f times, want 1", n)
	}
}

// TestResponseText: the pieces of a response's text join in order, empty
// ones change nothing, and a text in one piece is kept without a copy.
func TestResponseText(t *testing.T) {
	var text responseText
	for _, c := range []struct {
		pieces []string
		want   string
	}{
		{nil, ""},
		{[]string{"", "one", ""}, "one"},
		{[]string{"a", "", "b", "c"}, "abc"},
		{[]string{"", "x", "y"}, "xy"},
	} {
		text.Reset()
		for _, p := range c.pieces {
			text.WriteString(p)
		}
		if got := text.String(); got != c.want {
			t.Errorf("%q: %q, want %q", c.pieces, got, c.want)
		}
	}
	piece := strings.Repeat("z", 40)
	n := testing.AllocsPerRun(50, func() {
		text.Reset()
		text.WriteString(piece)
		if text.String() != piece {
			t.Fatal("the piece changed")
		}
	})
	if n != 0 && !raceDetector {
		t.Errorf("a text of one piece allocates %.0f times, want 0", n)
	}
}
