package scripted_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// request delivers a request (messages + END) for stream to l.
func request(t *testing.T, r *actorstest.Recorder, l actors.Logic, stream string, msgs string) {
	t.Helper()
	if msgs != "" {
		if err := r.Deliver(l, messages.RawParam(stream, models.ParamMessages, json.RawMessage(msgs))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Deliver(l, messages.End(stream)); err != nil {
		t.Fatal(err)
	}
}

func newLogic(t *testing.T, s scripted.Script) (*scripted.Model, actors.Logic) {
	t.Helper()
	m, err := scripted.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, m.Spec("model").New()
}

func trace(frames []*messages.Frame) []string {
	var out []string
	for _, f := range frames {
		s := f.GetType().String()
		switch {
		case f.IsToolArgChunk():
			s = "CHUNK " + f.GetToolCallId() + " " + f.GetText()
		case f.IsToolComplete():
			s = "COMPLETE " + f.GetToolCallId()
		case f.IsStreamingToolCall():
			s = "CALL~ " + f.GetToolCallId()
		case f.GetType() == messages.FrameType_TOOL_CALL:
			s = "CALL " + f.GetToolCallId() + " " + string(f.GetPayload())
		case f.GetType() == messages.FrameType_TEXT, f.GetType() == messages.FrameType_ERROR:
			s += " " + f.GetText()
		case f.GetType() == messages.FrameType_META:
			s += " " + f.GetName() + " " + string(f.GetPayload())
		}
		out = append(out, s)
	}
	return out
}

func TestModel_InterleavedStreamingCalls(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{{
		Interleave: true,
		ToolCalls: []scripted.ToolCall{
			{ID: "a", Name: "f", Chunks: []string{`{"x"`, `:1}`}},
			{ID: "b", Name: "f", Arguments: `{}`},
			{ID: "c", Name: "g", Chunks: []string{`{}`}},
		},
	}}})
	var r actorstest.Recorder
	request(t, &r, l, "s", "")
	want := []string{"CALL~ a", "CALL b {}", "CALL~ c", `CHUNK a {"x"`, "CHUNK c {}", "CHUNK a :1}", "COMPLETE c", "COMPLETE a",
		`META finish "tool_calls"`, "END"}
	if got := trace(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if _, err := models.ReadResponse(r.Emitted); err != nil {
		t.Fatal(err)
	}
}

func TestModel_DelaysAreTimers(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{{
		Delay: time.Second, Pace: 10 * time.Millisecond, Text: "abcd", Deltas: 2,
	}}})
	var r actorstest.Recorder
	request(t, &r, l, "s", "")
	if len(r.Emitted) != 0 || len(r.Timers) != 1 || r.Timers[0].D != time.Second {
		t.Fatalf("before the delay: emitted %q, timers %+v", trace(r.Emitted), r.Timers)
	}
	fire := func(i int) {
		t.Helper()
		if err := r.Deliver(l, actors.Timer{Key: r.Timers[i].Key}); err != nil {
			t.Fatal(err)
		}
	}
	fire(0)
	if got := trace(r.Emitted); !slices.Equal(got, []string{"TEXT ab"}) || len(r.Timers) != 2 || r.Timers[1].D != 10*time.Millisecond {
		t.Fatalf("after the delay: %q, timers %+v", got, r.Timers)
	}
	fire(1)
	fire(2) // the pace before the ending
	if got := trace(r.Emitted); !slices.Equal(got, []string{"TEXT ab", "TEXT cd", `META finish "stop"`, "END"}) {
		t.Fatalf("got %q", got)
	}
	// A stale timer (already fired) does nothing.
	fire(2)
	if len(r.Emitted) != 4 {
		t.Fatalf("stale timer emitted %q", trace(r.Emitted[4:]))
	}
}

func TestModel_CancelDuringDelayDropsTheTimer(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{{Delay: time.Hour, Text: "late"}}})
	var r actorstest.Recorder
	request(t, &r, l, "s", "")
	if err := r.Deliver(l, messages.Cancel("s", "")); err != nil {
		t.Fatal(err)
	}
	if err := r.Deliver(l, actors.Timer{Key: r.Timers[0].Key}); err != nil {
		t.Fatal(err)
	}
	if got := trace(r.Emitted); !slices.Equal(got, []string{"ERROR cancelled", "END"}) {
		t.Fatalf("got %q", got)
	}
}

func TestModel_QueuedRequestWaitsForTheActiveOne(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{{Delay: time.Second, Text: "one"}, {Text: "two"}}})
	var r actorstest.Recorder
	request(t, &r, l, "s", "")
	request(t, &r, l, "s", "")
	if len(r.Emitted) != 0 {
		t.Fatalf("second request answered while the first waits: %q", trace(r.Emitted))
	}
	if err := r.Deliver(l, actors.Timer{Key: r.Timers[0].Key}); err != nil {
		t.Fatal(err)
	}
	want := []string{"TEXT one", `META finish "stop"`, "END", "TEXT two", `META finish "stop"`, "END"}
	if got := trace(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestModel_ByConversationPicksTurnFromAssistantMessages(t *testing.T) {
	m, l := newLogic(t, scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "zero"}, {Text: "one"}}})
	var r actorstest.Recorder
	request(t, &r, l, "a", `[{"role":"user","content":"hi"}]`)
	request(t, &r, l, "b", `[{"role":"user","content":"hi"},{"role":"assistant","content":"x"},{"role":"tool","tool_call_id":"c","content":"y"}]`)
	request(t, &r, l, "c", `[{"role":"user","content":"hi"}]`) // another conversation: turn 0 again
	request(t, &r, l, "d", `[{"role":"assistant"},{"role":"assistant"}]`)
	var texts, errs []string
	for _, f := range r.Emitted {
		switch f.GetType() {
		case messages.FrameType_TEXT:
			texts = append(texts, f.GetStreamId()+":"+f.GetText())
		case messages.FrameType_ERROR:
			errs = append(errs, f.GetStreamId()+":"+f.GetText())
		}
	}
	if !slices.Equal(texts, []string{"a:zero", "b:one", "c:zero"}) {
		t.Fatalf("texts %q", texts)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "d:script exhausted") {
		t.Fatalf("errors %q, want d exhausted", errs)
	}
	var turns []int
	for _, rec := range m.Requests() {
		turns = append(turns, rec.Turn)
	}
	if !slices.Equal(turns, []int{0, 1, 0, -1}) || m.Served() != 4 {
		t.Fatalf("recorded turns %v, served %d", turns, m.Served())
	}
}

func TestModel_SequenceRepeatsAndRecordsBoundedHistory(t *testing.T) {
	m, err := scripted.New(scripted.Script{Repeat: true, Turns: []scripted.Turn{{Text: "a"}, {Text: "b"}}}, &scripted.Options{MaxRecorded: 3})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Spec("m").New()
	var r actorstest.Recorder
	for i := range 5 {
		request(t, &r, l, "s", `[{"role":"user","content":"`+string(rune('0'+i))+`"}]`)
	}
	var texts string
	for _, f := range r.Emitted {
		texts += f.GetText()
	}
	if texts != "ababa" {
		t.Fatalf("texts %q, want ababa", texts)
	}
	var got []string
	for _, rec := range m.Requests() {
		v, _ := rec.Request.Param(models.ParamMessages)
		got = append(got, string(v))
	}
	if len(got) != 3 || !strings.Contains(got[0], `"2"`) || !strings.Contains(got[2], `"4"`) {
		t.Fatalf("kept %q, want the last 3 requests oldest first", got)
	}
}

func TestModel_ErrorRawAndStallTurns(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{
		{Text: "part", ToolCalls: []scripted.ToolCall{{ID: "c", Name: "f", Arguments: `{"trunc`, Raw: true, Split: 2}}, Error: "cut off"},
		{ToolCalls: []scripted.ToolCall{{ID: "e", Name: "f", Raw: true}}, Usage: &scripted.Usage{TotalTokens: 3}},
		{Stall: true, Text: "wait"},
	}})
	var r actorstest.Recorder
	request(t, &r, l, "s", "")
	request(t, &r, l, "s", "")
	request(t, &r, l, "s", "")
	want := []string{"TEXT part", "CALL~ c", `CHUNK c {"t`, "CHUNK c runc", "COMPLETE c", "ERROR cut off", "END",
		"CALL e ", `META usage {"prompt_tokens":0,"completion_tokens":0,"total_tokens":3}`, `META finish "tool_calls"`, "END",
		"TEXT wait"}
	if got := trace(r.Emitted); !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestNew_RejectsBadScripts(t *testing.T) {
	for name, s := range map[string]scripted.Script{
		"no turns":        {},
		"selection":       {Select: "random", Turns: []scripted.Turn{{}}},
		"no id":           {Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{{Name: "f"}}}}},
		"duplicate id":    {Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{{ID: "a", Name: "f"}, {ID: "a", Name: "f"}}}}},
		"invalid args":    {Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{{ID: "a", Name: "f", Arguments: `{"x":`}}}}},
		"chunks mismatch": {Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{{ID: "a", Name: "f", Arguments: `{}`, Chunks: []string{`{"a":1}`}}}}}},
		"negative":        {Turns: []scripted.Turn{{Deltas: -1}}},
	} {
		if _, err := scripted.New(s, nil); err == nil {
			t.Errorf("%s: New accepted the script", name)
		}
	}
}

func TestLoad_JSONScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	src := `{"select": "conversation", "turns": [
	  {"text": "Writing.", "deltas": 2, "delay": "20ms", "pace": "5ms",
	   "tool_calls": [{"id": "call_1", "name": "write_file", "arguments": {"path": "a.go"}, "split": 3},
	                  {"id": "call_2", "name": "run_command", "arguments": "{\"command\":\"ls\"}"}]},
	  {"text": "Done.", "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}]}`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := scripted.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := s.Turns[0]
	if s.Select != scripted.ByConversation || t0.Delay != 20*time.Millisecond || t0.Pace != 5*time.Millisecond ||
		t0.ToolCalls[0].Arguments != `{"path": "a.go"}` || t0.ToolCalls[1].Arguments != `{"command":"ls"}` || s.Turns[1].Usage.TotalTokens != 3 {
		t.Fatalf("loaded %+v", s)
	}
	// It survives a round trip through MarshalJSON.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := scripted.Parse(data)
	if err != nil {
		t.Fatalf("parse %s: %v", data, err)
	}
	if again.Turns[0].Delay != t0.Delay || again.Turns[0].ToolCalls[1].Arguments != t0.ToolCalls[1].Arguments {
		t.Fatalf("round trip changed the script: %s", data)
	}
	if _, err := scripted.Parse([]byte(`{"turns": [{"txt": "typo"}]}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
	if _, err := scripted.Parse([]byte(`{"turns": [{"delay": "soon"}]}`)); err == nil {
		t.Fatal("bad duration accepted")
	}
}

func TestModel_SplitNeverCutsACharacter(t *testing.T) {
	text := "héllo wörld ✓✓✓ ünïcödé"
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{{Text: text, Deltas: 9,
		ToolCalls: []scripted.ToolCall{{ID: "c", Name: "f", Arguments: `{"s":"✓✓✓✓✓"}`, Split: 7}}}}})
	var r actorstest.Recorder
	request(t, &r, l, "s", "")
	deltas := 0
	for _, f := range r.Emitted {
		if !utf8.ValidString(f.GetText()) {
			t.Fatalf("frame text %q is not valid UTF-8", f.GetText())
		}
		if f.GetType() == messages.FrameType_TEXT && !f.IsToolArgChunk() {
			deltas++
		}
	}
	resp, err := models.ReadResponse(r.Emitted)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != text || deltas < 2 || string(resp.ToolCalls[0].Arguments) != `{"s":"✓✓✓✓✓"}` {
		t.Fatalf("text %q in %d deltas, args %s", resp.Text, deltas, resp.ToolCalls[0].Arguments)
	}
}

func TestModel_ForkHasItsOwnSequenceAndRecords(t *testing.T) {
	m, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{Text: "a"}, {Text: "b"}}}, &scripted.Options{MaxRecorded: 2})
	if err != nil {
		t.Fatal(err)
	}
	play := func(m *scripted.Model, stream string) string {
		t.Helper()
		var r actorstest.Recorder
		request(t, &r, m.Spec("m").New(), stream, `[{"role":"user","content":"hi"}]`)
		var text string
		for _, f := range r.Emitted {
			text += f.GetText() + f.GetType().String() + ";"
		}
		return text
	}
	first := play(m, "s1")
	f := m.Fork()
	// The fork starts at the first turn, whatever the original served.
	if got := play(f, "s2"); got != strings.ReplaceAll(first, "s1", "s2") || !strings.HasPrefix(got, "a") {
		t.Fatalf("fork's first turn %q, want the script's first (%q)", got, first)
	}
	if got := play(m, "s3"); !strings.HasPrefix(got, "b") {
		t.Fatalf("original's second turn %q, want b: the fork must not advance it", got)
	}
	if got := play(f, "s4"); !strings.HasPrefix(got, "b") {
		t.Fatalf("fork's second turn %q, want b", got)
	}
	// Each keeps its own records and count, with the same bound.
	if m.Served() != 2 || f.Served() != 2 || len(m.Requests()) != 2 || len(f.Requests()) != 2 {
		t.Fatalf("served %d and %d, recorded %d and %d, want 2 each", m.Served(), f.Served(), len(m.Requests()), len(f.Requests()))
	}
	// Past the script's end (no Repeat), a fork is exhausted as the original is.
	var r actorstest.Recorder
	request(t, &r, f.Spec("m").New(), "s5", `[{"role":"user","content":"hi"}]`)
	if len(r.Emitted) == 0 || r.Emitted[0].GetType() != messages.FrameType_ERROR {
		t.Fatalf("fork past its script: %v, want ERROR", r.Emitted)
	}
}

// TestModel_StreamSendsItsEndingFramesAgain: the turns of one stream that
// end alike send the same META finish and END frames again (frames are
// immutable once sent), a different ending gets frames of its own, and
// another stream gets frames of its own stream; after a turn without
// calls, which usually ends a conversation, none are kept; what every
// frame says is what the turn says.
func TestModel_StreamSendsItsEndingFramesAgain(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "a", Name: "f"}}},
		{ToolCalls: []scripted.ToolCall{{ID: "b", Name: "f"}}},
		{Text: "done", Usage: &scripted.Usage{TotalTokens: 2}},
		{Text: "other"},
		{ToolCalls: []scripted.ToolCall{{ID: "c", Name: "f"}}, Error: "boom"},
		{ToolCalls: []scripted.ToolCall{{ID: "d", Name: "f"}}, Error: "boom"},
	}})
	var r actorstest.Recorder
	var turns [][]*messages.Frame
	for _, stream := range []string{"s", "s", "s", "o", "o", "o"} {
		r.Emitted = nil
		request(t, &r, l, stream, "")
		for _, f := range r.Emitted {
			if f.GetStreamId() != stream {
				t.Fatalf("a frame of stream %q answering a request of %q", f.GetStreamId(), stream)
			}
		}
		turns = append(turns, r.Emitted)
	}
	want := [][]string{
		{"CALL a {}", `META finish "tool_calls"`, "END"},
		{"CALL b {}", `META finish "tool_calls"`, "END"},
		{"TEXT done", `META usage {"prompt_tokens":0,"completion_tokens":0,"total_tokens":2}`, `META finish "stop"`, "END"},
		{"TEXT other", `META finish "stop"`, "END"},
		{"CALL c {}", "ERROR boom", "END"},
		{"CALL d {}", "ERROR boom", "END"},
	}
	for i, frames := range turns {
		if got := trace(frames); !slices.Equal(got, want[i]) {
			t.Errorf("turn %d: %q, want %q", i, got, want[i])
		}
	}
	last := func(i, back int) *messages.Frame { return turns[i][len(turns[i])-1-back] }
	switch {
	case last(0, 0) != last(1, 0) || last(1, 0) != last(2, 0):
		t.Error("the stream's turns made END anew")
	case last(0, 1) != last(1, 1):
		t.Error("the stream's turns made the same META finish anew")
	case last(1, 1) == last(2, 1):
		t.Error(`META finish "stop" sent as "tool_calls"`)
	case last(3, 0) == last(2, 0) || last(3, 1) == last(2, 1):
		t.Error("another stream got the first stream's ending frames")
	case last(4, 0) == last(3, 0):
		t.Error("the END of a turn without calls was kept")
	case last(5, 0) != last(4, 0) || last(5, 1) != last(4, 1):
		t.Error("the ERROR and END of a stream were made anew")
	}
}

// TestModel_LargeTurnKeepsNoEndingFrames: the ending frames of a turn of
// many frames (streamed text) are not sent again by the stream's next
// turn: kept, they would hold the whole turn's frames on an idle adapter
// whose conversation ended at that turn.
func TestModel_LargeTurnKeepsNoEndingFrames(t *testing.T) {
	_, l := newLogic(t, scripted.Script{Turns: []scripted.Turn{
		{Text: strings.Repeat("x", 64), Deltas: 64, ToolCalls: []scripted.ToolCall{{ID: "a", Name: "f"}}},
		{ToolCalls: []scripted.ToolCall{{ID: "b", Name: "f"}}},
		{ToolCalls: []scripted.ToolCall{{ID: "c", Name: "f"}}},
	}})
	var r actorstest.Recorder
	var ends []*messages.Frame
	for range 3 {
		r.Emitted = nil
		request(t, &r, l, "s", "")
		if n := len(r.Emitted); n < 3 || r.Emitted[n-1].GetType() != messages.FrameType_END {
			t.Fatalf("turn: %q", trace(r.Emitted))
		}
		ends = append(ends, r.Emitted[len(r.Emitted)-1])
	}
	if ends[0] == ends[1] {
		t.Error("the END of a turn of 67 frames was kept and sent again")
	}
	if ends[1] != ends[2] {
		t.Error("the END of a small turn was made anew: small turns should keep theirs")
	}
}

// An exhausted script is a permanent failure: asking again meets it again,
// so its ERROR says so and consumers do not retry it.
func TestExhaustedScriptIsPermanent(t *testing.T) {
	for _, sel := range []scripted.Selection{scripted.BySequence, scripted.ByConversation} {
		_, l := newLogic(t, scripted.Script{Select: sel, Turns: []scripted.Turn{{Text: "zero"}}})
		var r actorstest.Recorder
		request(t, &r, l, "a", `[{"role":"user","content":"hi"}]`)
		request(t, &r, l, "b", `[{"role":"user","content":"hi"},{"role":"assistant","content":"zero"},{"role":"user","content":"more"}]`)
		var kinds []string
		for _, f := range r.Emitted {
			if f.GetType() == messages.FrameType_ERROR {
				kinds = append(kinds, f.GetStreamId()+":"+f.GetMeta().GetFailureKind())
			}
		}
		if !slices.Equal(kinds, []string{"b:" + models.FailurePermanent}) {
			t.Errorf("%s: errors of kinds %q, want one of kind %q on b", sel, kinds, models.FailurePermanent)
		}
	}
}
