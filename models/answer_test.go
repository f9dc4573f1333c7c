package models_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// TestAnswer_FinishReason: the finish reason is read whether plain or
// with JSON escapes; a payload that is not a JSON string is ignored.
func TestAnswer_FinishReason(t *testing.T) {
	for payload, want := range map[string]string{
		`"stop"`:        "stop",
		`"tool_calls"`:  "tool_calls",
		`"a\"b\u00e9"`:  `a"bé`,
		`""`:            "",
		`42`:            "kept",
		`"unterminated`: "kept",
		`"bad\escape"`:  "kept",
	} {
		a := models.Answer{Finish: "kept"}
		a.Add(messages.Meta("s", models.MetaFinish, json.RawMessage(payload)))
		if a.Finish != want {
			t.Errorf("finish %s: %q, want %q", payload, a.Finish, want)
		}
	}
}

// conversationFrames is a stream of rounds rounds of calls calls each
// (text along with the calls in pieces), then a final answer in pieces.
func conversationFrames(s string, rounds, calls int) []*messages.Frame {
	var out []*messages.Frame
	for r := range rounds {
		out = append(out, messages.Text(s, "round "), messages.Text(s, strconv.Itoa(r)))
		for c := range calls {
			id := fmt.Sprintf("c%d.%d", r, c)
			out = append(out, messages.ToolCall(s, id, "f", json.RawMessage(`{"c":`+strconv.Itoa(c)+`}`)))
		}
		out = append(out, models.FinishFrame(s, "tool_calls"))
		for c := range calls {
			id := fmt.Sprintf("c%d.%d", r, c)
			out = append(out, messages.RawToolResult(s, id, "f", json.RawMessage(`{"r":`+strconv.Itoa(c)+`}`)))
		}
	}
	return append(out, messages.Text(s, "all "), messages.Text(s, "done"), models.FinishFrame(s, "stop"), messages.End(s))
}

// TestAnswer_ManyRounds: conversations longer and wider than the room an
// Answer starts with keep every round, call and result in place, whether
// the Answer is the zero one or from NewAnswer; a round's lists are
// closed, so appending to one does not write over the next.
func TestAnswer_ManyRounds(t *testing.T) {
	for _, shape := range [][2]int{{1, 1}, {3, 1}, {4, 1}, {6, 1}, {2, 3}, {1, 5}, {5, 5}} {
		rounds, calls := shape[0], shape[1]
		for name, a := range map[string]*models.Answer{"zero": {}, "new": models.NewAnswer("s")} {
			for _, f := range conversationFrames("s", rounds, calls) {
				a.Add(f)
			}
			if !a.Answered || a.Text != "all done" || a.Finish != "stop" || len(a.Rounds) != rounds || a.ToolCalls() != rounds*calls {
				t.Fatalf("%s %dx%d: answer %+v", name, rounds, calls, a)
			}
			for r := range rounds {
				round := a.Rounds[r]
				if round.Text != "round "+strconv.Itoa(r) || !round.Complete() || len(round.Calls) != calls {
					t.Fatalf("%s %dx%d: round %d %+v", name, rounds, calls, r, round)
				}
				round.Calls = append(round.Calls, models.ToolCall{ID: "extra"})
				round.Results = append(round.Results, models.ToolResult{CallID: "extra"})
				for c := range calls {
					id := fmt.Sprintf("c%d.%d", r, c)
					if round.Calls[c].ID != id || round.Results[c].CallID != id || string(round.Results[c].Content) != `{"r":`+strconv.Itoa(c)+`}` {
						t.Fatalf("%s %dx%d: round %d call %d: %+v / %+v", name, rounds, calls, r, c, round.Calls[c], round.Results[c])
					}
				}
			}
			for r := range rounds { // the appends above wrote over nothing
				if id := a.Rounds[r].Calls[0].ID; id != fmt.Sprintf("c%d.0", r) {
					t.Fatalf("%s %dx%d: round %d now starts with %s", name, rounds, calls, r, id)
				}
			}
		}
	}
}

// TestAnswer_Allocs: folding figure 7's conversation (three rounds of one
// call, text in one piece) into an Answer from NewAnswer allocates the
// Answer alone; the finish reasons the adapters report allocate nothing.
func TestAnswer_Allocs(t *testing.T) {
	var frames []*messages.Frame
	for _, f := range conversationFrames("s", 3, 1) {
		if t := f.GetText(); f.GetType() == messages.FrameType_TEXT && (len(t) < 3 || t == "done") {
			continue // the second pieces
		}
		frames = append(frames, f)
	}
	n := testing.AllocsPerRun(50, func() {
		a := models.NewAnswer("s")
		for _, f := range frames {
			a.Add(f)
		}
		if a.Text != "all " || a.ToolCalls() != 3 {
			t.Fatalf("answer %+v", a)
		}
	})
	if n != 1 && !raceDetector {
		t.Errorf("%v allocations folding a 3-round conversation, want 1", n)
	}
}

// A second TOOL_RESULT for a call already answered is ignored: the
// round keeps one result per call, so that its messages answer every
// call once (a provider refuses a call answered twice, or not at all).
func TestAnswer_SecondResultOfACallIsIgnored(t *testing.T) {
	var a models.Answer
	for _, f := range []*messages.Frame{
		messages.ToolCall("s", "A", "f", json.RawMessage(`{}`)), messages.ToolCall("s", "B", "f", json.RawMessage(`{}`)),
		messages.RawToolResult("s", "A", "f", json.RawMessage(`"first"`)),
		messages.RawToolResult("s", "A", "f", json.RawMessage(`"again"`)),
		messages.RawToolResult("s", "B", "f", json.RawMessage(`"b"`)),
		messages.Text("s", "done"), messages.End("s"),
	} {
		a.Add(f)
	}
	var got []string
	for _, m := range a.Messages() {
		got = append(got, m.Role+" "+m.ToolCallID+" "+m.Content)
	}
	want := []string{"assistant  ", `tool A "first"`, `tool B "b"`, "assistant  done"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages\n got  %q\n want %q", got, want)
	}
}

// figure7Frames is figure 7's run as its loop emits it: three rounds of
// one call, each with its finish reason and result, then the answer in
// one piece, its finish reason and END.
func figure7Frames(s string) []*messages.Frame {
	var out []*messages.Frame
	for i, name := range []string{"noop_a", "noop_b", "noop_c"} {
		id := "call_" + strconv.Itoa(i+1)
		out = append(out, messages.ToolCall(s, id, name, json.RawMessage(`{"n":`+strconv.Itoa(i+1)+`}`)),
			models.FinishFrame(s, "tool_calls"), messages.RawToolResult(s, id, name, json.RawMessage(`{"ok":true}`)))
	}
	return append(out, messages.Text(s, "done"), models.FinishFrame(s, "stop"), messages.End(s))
}

// BenchmarkAnswer folds figure 7's run into an Answer from NewAnswer, as
// agent.Run does once the run's END has come: on the run's critical path.
// The collector is kept out of the loop, as figure 7's interleaved rows
// keep it out of their slices: the heap is collected, untimed, every
// 1000 answers, so that they reuse memory as a run's do.
func BenchmarkAnswer(b *testing.B) {
	frames := figure7Frames("s")
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n++; n%1000 == 0 {
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
		}
		a := models.NewAnswer("s")
		for _, f := range frames {
			a.Add(f)
		}
		if !a.Answered || a.Text != "done" || a.ToolCalls() != 3 {
			b.Fatalf("answer %+v", a)
		}
	}
}

// Results are kept in call order whatever order they come in, one a
// call: a result for a call whose id an earlier call has too goes to the
// first call of that id, and a second result of an id is ignored.
func TestAnswer_ResultsInCallOrder(t *testing.T) {
	call := func(id string) *messages.Frame { return messages.ToolCall("s", id, "f", json.RawMessage(`{}`)) }
	result := func(id, v string) *messages.Frame { return messages.RawToolResult("s", id, "f", json.RawMessage(v)) }
	for _, c := range []struct {
		name   string
		frames []*messages.Frame
		want   string
	}{
		{"in order", []*messages.Frame{call("A"), call("B"), call("C"), result("A", "1"), result("B", "2"), result("C", "3")}, "A1 B2 C3"},
		{"reversed", []*messages.Frame{call("A"), call("B"), call("C"), result("C", "3"), result("B", "2"), result("A", "1")}, "A1 B2 C3"},
		{"middle first", []*messages.Frame{call("A"), call("B"), call("C"), result("B", "2"), result("A", "1"), result("C", "3")}, "A1 B2 C3"},
		{"again in order", []*messages.Frame{call("A"), call("B"), result("A", "1"), result("A", "9"), result("B", "2"), result("B", "9")}, "A1 B2"},
		{"unknown", []*messages.Frame{call("A"), result("Z", "9"), result("A", "1")}, "A1"},
		{"same id twice", []*messages.Frame{call("A"), call("A"), result("A", "1"), result("A", "2")}, "A1"},
		{"same id after another", []*messages.Frame{call("A"), call("B"), call("A"), result("B", "2"), result("A", "1"), result("A", "3")}, "A1 B2"},
		{"same id, later first", []*messages.Frame{call("A"), call("B"), call("B"), result("A", "1"), result("B", "2"), result("B", "3")}, "A1 B2"},
	} {
		var a models.Answer
		for _, f := range append(c.frames, messages.End("s")) {
			a.Add(f)
		}
		if len(a.Rounds) != 1 {
			t.Fatalf("%s: rounds %+v", c.name, a.Rounds)
		}
		var got []string
		for _, r := range a.Rounds[0].Results {
			got = append(got, r.CallID+string(r.Content))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: results %q, want %q", c.name, got, c.want)
		}
	}
}
