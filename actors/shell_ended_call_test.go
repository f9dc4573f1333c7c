package actors

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here hold that a call the Logic ended by its tool-call id,
// on a stream that carries other calls, stays ended: a second END of it
// ends none of the others, and a late frame with its id but its
// TOOL_CALL (its rest, on its way) opens it again no more than a late
// argument chunk does; a TOOL_CALL with its id is the call sent again, a
// new call, and a frame with an id never seen is a new call too. A stop
// then answers each call still open once, and none twice.

// twiceEndingDuplex is a duplex "d" that holds a TEXT (a call of no id,
// as a model's prompt) and a TOOL_CALL of tool "hold"; answers any other
// TOOL_CALL with a TOOL_RESULT and the END of the call alone (its id),
// and a TOOL_CALL of tool "twice" with a second END of it after;
// answers a TEXT "again <id>" with a second END of call <id>, a TEXT
// "probe" with END of its stream; and fails on a TEXT "boom".
func twiceEndingDuplex() Spec {
	return frameDuplex(func(c Context, f *messages.Frame) {
		id := f.GetStreamId()
		switch {
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "probe":
			c.Emit(messages.End(id))
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "boom":
			panic("boom")
		case f.GetType() == messages.FrameType_TEXT && strings.HasPrefix(f.GetText(), "again "):
			c.Emit(endOf(id, strings.TrimPrefix(f.GetText(), "again ")))
		case f.GetType() == messages.FrameType_TOOL_CALL && f.GetName() != "hold":
			c.Emit(messages.RawToolResult(id, f.GetToolCallId(), f.GetName(), []byte(`1`)))
			c.Emit(endOf(id, f.GetToolCallId()))
			if f.GetName() == "twice" {
				c.Emit(endOf(id, f.GetToolCallId()))
			}
		}
	})
}

// stopAnswers writes frames into a duplex of twiceEndingDuplex, then a
// probe, stops it once the probe is answered (every frame before it
// taken), and returns what stream s got after the Logic's own frames:
// the stop's answers, with the failure kind and the tool-call id of each.
func stopAnswers(t *testing.T, frames ...*messages.Frame) []string {
	t.Helper()
	return stopAnswersWith(t, nil, frames...)
}

// stopAnswersWith is stopAnswers on a runtime of opts.
func stopAnswersWith(t *testing.T, opts *RuntimeOptions, frames ...*messages.Frame) []string {
	t.Helper()
	rt := startRuntimeWith(t, opts)
	conn, err := rt.Start(twiceEndingDuplex())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if err := conn.SendAll(append(frames, messages.Text("g", "probe"))...); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range closeAndDrain(t, conn) {
		if f.GetStreamId() == "s" && f.GetType() != messages.FrameType_TOOL_RESULT {
			got = append(got, withCallID(f)+"["+f.GetMeta().GetFailureKind()+"]")
		}
	}
	return got
}

// closeAndDrain stops conn's duplex and returns the frames it emitted
// that were not read yet, up to its stop.
func closeAndDrain(t *testing.T, conn *Conn) []*messages.Frame {
	t.Helper()
	ctx := testContext(t)
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var got []*messages.Frame
	for {
		f, err := conn.Recv(ctx)
		if errors.Is(err, ErrDuplexStopped) {
			return got
		}
		if err != nil {
			t.Fatalf("recv: %v after %d frames", err, len(got))
		}
		got = append(got, f)
	}
}

// stoppedPair is the ERROR and END with which a stop answers the call of
// tool-call id call.
func stoppedPair(call string) []string {
	return []string{"ERROR(" + ErrStopped.Error() + ")/" + call + "[" + StoppedKind + "]", "END/" + call + "[]"}
}

// TestConn_SecondEndOfAnEndedCallEndsNoOther: a stream carries a call of
// no id (a TEXT) and a call a, or calls a and b; the Logic ends a by its
// id twice. The second END ends nothing, and is dropped (see
// TestConn_SecondEndOfACallNotPassedOn): the other call is still open,
// and the stop answers it. Ending the stream there would leave its
// caller waiting forever.
func TestConn_SecondEndOfAnEndedCallEndsNoOther(t *testing.T) {
	t.Run("beside a call of no id", func(t *testing.T) {
		got := stopAnswers(t, messages.Text("s", "hi"), messages.ToolCall("s", "a", "twice", nil))
		want := append([]string{"END/a[]"}, stoppedPair("")...)
		if !slices.Equal(got, want) {
			t.Errorf("stream s got %q, want %q (the call of no id answered by the stop)", got, want)
		}
	})
	t.Run("beside a call with an id", func(t *testing.T) {
		got := stopAnswers(t, messages.StreamingToolCall("s", "b", "hold"), messages.ToolCall("s", "a", "twice", nil))
		want := append([]string{"END/a[]"}, stoppedPair("b")...)
		if !slices.Equal(got, want) {
			t.Errorf("stream s got %q, want %q (b answered by the stop)", got, want)
		}
	})
}

// TestConn_SecondEndOfAForgottenEndedCallEndsNoOther: a stream carries
// a call of no id (a TEXT) beside calls the Logic answers and ends by
// their ids, more than the stream keeps (endedMax); the Logic then ends
// the first of them, forgotten, a second time. That END ends nothing
// either: the call of no id is still open, and the stop answers it.
func TestConn_SecondEndOfAForgottenEndedCallEndsNoOther(t *testing.T) {
	frames := []*messages.Frame{messages.Text("s", "hi")}
	var want []string
	for i := range endedMax + 1 {
		c := "c" + strconv.Itoa(i)
		frames = append(frames, messages.ToolCall("s", c, "tool", nil))
		want = append(want, "END/"+c+"[]")
	}
	frames = append(frames, messages.Text("s", "again c0"))
	want = append(append(want, "END/c0[]"), stoppedPair("")...)
	if got := stopAnswers(t, frames...); !slices.Equal(got, want) {
		t.Errorf("stream s got %q,\nwant %q (the call of no id answered by the stop)", got, want)
	}
}

// TestConn_LateFrameOfAnEndedCall: a stream carries a call of no id (a
// TEXT) and a call a, which the Logic answers and ends by its id. A
// frame with a's id that comes after is a's rest, on its way, unless it
// begins a call: a PARAM or a TEXT with it opens a no more, and the stop
// answers the call of no id alone (a second answer of a would be a
// dangling result for its caller). A TOOL_CALL with a's id is a sent
// again, a new call, and a PARAM with an id never seen on the stream is
// a new call: the stop answers each.
func TestConn_LateFrameOfAnEndedCall(t *testing.T) {
	param := func(call string) *messages.Frame {
		f := messages.RawParam("s", "x", []byte(`1`))
		f.ToolCallId = call
		return f
	}
	text := func(call string) *messages.Frame {
		f := messages.Text("s", "more")
		f.ToolCallId = call
		return f
	}
	for _, tc := range []struct {
		name string
		late []*messages.Frame
		want []string // the stop's answers
	}{
		{"PARAM of a", []*messages.Frame{param("a")}, stoppedPair("")},
		{"TEXT of a", []*messages.Frame{text("a")}, stoppedPair("")},
		{"TOOL_CALL of a again", []*messages.Frame{messages.StreamingToolCall("s", "a", "hold")}, append(stoppedPair("a"), stoppedPair("")...)},
		{"TOOL_CALL of a again, then its PARAM", []*messages.Frame{messages.StreamingToolCall("s", "a", "hold"), param("a")},
			append(stoppedPair("a"), stoppedPair("")...)},
		{"PARAM of a new call", []*messages.Frame{param("a"), param("b")}, append(stoppedPair("b"), stoppedPair("")...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := append([]*messages.Frame{messages.Text("s", "hi"), messages.ToolCall("s", "a", "tool", nil)}, tc.late...)
			got := stopAnswers(t, frames...)
			if want := append([]string{"END/a[]"}, tc.want...); !slices.Equal(got, want) {
				t.Errorf("stream s got %q, want %q", got, want)
			}
		})
	}
}

// TestOpenStreams_SharesNoAllocation: telling whether a call shares its
// stream with others (as a Resume does) costs no allocation, whatever
// the number of calls the stream carries.
func TestOpenStreams_SharesNoAllocation(t *testing.T) {
	var o openStreams
	o.openCalls("s", "c1", "c2", "c3")
	o.openCalls("t", "c1", "")
	o.openCalls("x0")
	o.openCalls("u", "c1", "c2") // past the inline room
	shares := func() {
		if !o.shares("s", "c2") || !o.shares("t", "c1") || !o.shares("u", "c1") || o.shares("s", "c9") {
			t.Fatal("shares: wrong answer")
		}
	}
	if n := testing.AllocsPerRun(100, shares); n != 0 {
		t.Errorf("shares cost %v allocations, want 0", n)
	}
}

// openCalls opens id and notes calls on it.
func (o *openStreams) openCalls(id string, calls ...string) {
	o.add(id)
	for _, c := range calls {
		o.noteCall(id, c)
	}
}

// BenchmarkOpenStreams_Shares measures what a Resume asks of a stream
// that carries three calls: whether the failed call shares it.
func BenchmarkOpenStreams_Shares(b *testing.B) {
	var o openStreams
	o.openCalls("s", "c1", "c2", "c3")
	b.ReportAllocs()
	for b.Loop() {
		if !o.shares("s", "c2") {
			b.Fatal("c2 shares s")
		}
	}
}

// TestOpenStreams_EndedCallsBounded: a stream kept open by a call of no
// id (a model's text beside its tool calls) whose Logic ends call after
// call by their ids keeps the endedMax ended last, not one more for each
// call for as long as it is open: the newest are still ended, the oldest
// forgotten.
func TestOpenStreams_EndedCallsBounded(t *testing.T) {
	for _, id := range []string{"s", "m"} { // inline, and past the inline room
		var o openStreams
		if id == "m" {
			o.openCalls("x0")
			o.openCalls("x1")
		}
		o.openCalls(id, "")
		const calls = endedMax + 5
		for i := range calls {
			c := "c" + strconv.Itoa(i)
			o.noteCall(id, c)
			if !o.endCall(id, c) {
				t.Fatalf("stream %s: endCall(%s) ended the stream, which carries a call of no id", id, c)
			}
		}
		if !o.has(id) {
			t.Fatalf("stream %s closed, its call of no id open", id)
		}
		if !o.endedCall(id, "c"+strconv.Itoa(calls-1)) || !o.endedCall(id, "c"+strconv.Itoa(calls-endedMax)) {
			t.Errorf("stream %s: the %d calls ended last are not all ended", id, endedMax)
		}
		if o.endedCall(id, "c"+strconv.Itoa(calls-endedMax-1)) {
			t.Errorf("stream %s: more than %d ended calls kept", id, endedMax)
		}
	}
}

// TestOpenStreams_SecondEndPastEndedMax: a second END of a call the
// Logic ended, past the endedMax a stream keeps, ends none of the calls
// the stream still holds (one of no id, or one with an id); nor does an
// END with an id a stream holding a call with an id never carried, the
// Logic having ended none of them. An END with any id ends a stream that
// holds no call (one the Logic opened with its own frames), or only a
// call of no id the Logic ended none beside.
func TestOpenStreams_SecondEndPastEndedMax(t *testing.T) {
	for _, id := range []string{"s", "m"} { // inline, and past the inline room
		for _, held := range []string{"", "h"} {
			var o openStreams
			if id == "m" {
				o.openCalls("x0")
				o.openCalls("x1")
			}
			o.openCalls(id, held)
			for i := range endedMax + 1 {
				c := "c" + strconv.Itoa(i)
				o.noteCall(id, c)
				o.endCall(id, c)
			}
			if o.endedCall(id, "c0") {
				t.Fatalf("stream %s: c0 still kept among the ended calls", id)
			}
			if !o.endCall(id, "c0") || !o.has(id) {
				t.Errorf("stream %s holding %q: a second END of c0, ended past endedMax, ended the stream", id, held)
			}
			if calls, anon := o.answers(id, nil); held == "" && !anon || held != "" && !slices.Equal(calls, []string{held}) {
				t.Errorf("stream %s holding %q: answers %q (of no id: %v) after a second END of c0", id, held, calls, anon)
			}
			// The stream's own call ended: an END with its id closes it.
			if held != "" && (o.endCall(id, held) || !o.has(id)) {
				// endCall reports false for the one call held: the
				// caller (shell.emit) removes the stream.
				t.Errorf("stream %s: the END of its last call %s reported as another's", id, held)
			}
		}
		// Never ended a call: an END with an id it does not hold ends
		// nothing either, beside a call with an id; one of a stream that
		// holds no call (the Logic opened it), or only calls of no id, is
		// the stream's END (see holdsOther).
		var o openStreams
		if id == "m" {
			o.openCalls("x0")
			o.openCalls("x1")
		}
		o.openCalls(id, "")
		if o.endCall(id, "c9") {
			t.Errorf("stream %s of a call of no id alone: an END with id c9 left it open", id)
		}
		o.remove(id)
		o.openCalls(id, "")
		o.openCalls(id, "c1")
		if !o.endCall(id, "c9") {
			t.Errorf("stream %s of call c1 and one of no id: an END with id c9 ended it", id)
		}
		o.remove(id)
		o.add(id)
		if o.endCall(id, "c9") {
			t.Errorf("stream %s the Logic opened: an END with id c9 left it open", id)
		}
	}
}

// TestConn_LateFrameAfterARestartOfACallItAnswered: a restart answers
// the calls open on a stream (ERROR and END of each), the Logic having
// answered and ended one of its calls before; the caller's PARAM with
// the id of either, sent before it had the answer, comes to the next
// incarnation. It is the rest of a call answered, dropped: taken for a
// new call, it would be answered a second time (by the stop here). A
// TOOL_CALL with such an id is a new call, answered.
func TestConn_LateFrameAfterARestartOfACallItAnswered(t *testing.T) {
	param := func(call string) *messages.Frame {
		f := messages.RawParam("s", "x", []byte(`1`))
		f.ToolCallId = call
		return f
	}
	for _, tc := range []struct {
		name  string
		calls []*messages.Frame // the stream's frames before the restart
		late  *messages.Frame
		want  map[string]int // ENDs by tool-call id
	}{{
		name:  "a call the Logic ended",
		calls: []*messages.Frame{messages.Text("s", "hi"), messages.ToolCall("s", "a", "tool", nil), messages.StreamingToolCall("s", "b", "hold")},
		late:  param("a"),
		want:  map[string]int{"a": 1, "b": 1, "": 1},
	}, {
		name:  "a call the restart answered, noted before the last",
		calls: []*messages.Frame{messages.StreamingToolCall("s", "a", "hold"), messages.StreamingToolCall("s", "b", "hold")},
		late:  param("a"),
		want:  map[string]int{"a": 1, "b": 1},
	}, {
		name:  "a call the Logic ended, sent again",
		calls: []*messages.Frame{messages.Text("s", "hi"), messages.ToolCall("s", "a", "tool", nil), messages.StreamingToolCall("s", "b", "hold")},
		late:  messages.StreamingToolCall("s", "a", "hold"),
		want:  map[string]int{"a": 2, "b": 1, "": 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			frames := append(slices.Clone(tc.calls), messages.Text("x", "boom"), tc.late)
			got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Restart)}, frames...)
			ends := map[string]int{}
			for _, g := range got {
				if call, ok := strings.CutPrefix(g, "END/"); ok {
					ends[strings.TrimSuffix(call, "[]")]++
				}
			}
			if !maps.Equal(ends, tc.want) {
				t.Errorf("stream s got %q: ENDs by call %v, want %v", got, ends, tc.want)
			}
		})
	}
}
