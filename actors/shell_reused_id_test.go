package actors

import (
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here hold that the record of a call the runtime answered
// (see closedCalls) drops its rest, and nothing but its rest: a frame
// that carries the answered call's id once its caller can send no more
// of it is a new call (models number the calls of each response afresh)
// and gets its one answer; a frame of the answered call's rest, sent
// before its answer, gets none.

// withID returns f with tool-call id call.
func withID(f *messages.Frame, call string) *messages.Frame {
	f.ToolCallId = call
	return f
}

// paramOf is a PARAM of the call of tool-call id call on stream s.
func paramOf(call string) *messages.Frame {
	return withID(messages.RawParam("s", "x", []byte(`1`)), call)
}

// TestConn_ParamAfterArgsCompleteIsNewCall: the streaming call c1 on s
// is answered by the runtime (a Resume of the failure in its frame, or a
// restart for another stream's failure) before its caller's META
// tool_complete, the end of its arguments, which comes after; a new call
// c2 is served on s and ended. A PARAM with c1's id after that is no
// rest of c1 (its arguments were complete): it opens a new call, a
// model's next response reusing the id, which the stop answers. Dropped,
// it would leave its caller waiting for ever.
func TestConn_ParamAfterArgsCompleteIsNewCall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		directive supervisor.Directive
		fail      *messages.Frame
	}{
		{"resume", supervisor.Resume, withID(messages.Text("s", "boom"), "c1")},
		{"restart", supervisor.Restart, messages.Text("f", "boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(tc.directive)},
				messages.StreamingToolCall("s", "c1", "hold"), tc.fail, messages.ToolComplete("s", "c1"),
				messages.ToolCall("s", "c2", "t", nil), paramOf("c1"))
			if ends, want := endsByCall(got), map[string]int{"c1": 2, "c2": 1}; !maps.Equal(ends, want) {
				t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
			}
		})
	}
}

// TestConn_ParamAfterArgsCompleteBeforeServedCall: as above, but the
// PARAM with c1's id comes before any other call on s: it is a new call
// all the same, and so is its next PARAM, which is that new call's.
func TestConn_ParamAfterArgsCompleteBeforeServedCall(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
		messages.ToolComplete("s", "c1"), paramOf("c1"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c1": 2}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}

// TestConn_DescribeWithSharedCallIDIsNewCall: a Resume answers c1 alone,
// c0 going on, on s; a DESCRIBE with c1's id that comes after is a new
// call (a whole call in one frame, never the rest of another: see the
// package doc), delivered, which the stop answers with c0.
func TestConn_DescribeWithSharedCallIDIsNewCall(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.ToolCall("s", "c0", "hold", nil), messages.StreamingToolCall("s", "c1", "hold"),
		withID(messages.Text("s", "boom"), "c1"), withID(messages.Describe("s"), "c1"))
	if ends, want := endsByCall(got), map[string]int{"c0": 1, "c1": 2}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the DESCRIBE answered by the stop)", got, ends, want)
	}
}

// TestConn_EndWithIDClosesStreamOfNoIDs: a stream opened by frames of no
// id (a prompt) carries no call with an id; the Logic's END with an id
// no frame had is that call's END, which closes the stream: the stop
// answers nothing more there (a second END for one call).
func TestConn_EndWithIDClosesStreamOfNoIDs(t *testing.T) {
	got := stopAnswers(t, messages.Text("s", "hi"), messages.Text("s", "again x"))
	if ends, want := endsByCall(got), map[string]int{"x": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (one END for the one call)", got, ends, want)
	}
}

// TestConn_SharedRestInNextIncarnationOnOpenStream: a Resume answers c1
// alone on s, c0 going on; the Logic ends c0, closing s, and a restart
// for another stream's failure comes before c1's caller sends its END.
// In the next incarnation a new call c2 opens s; a PARAM of c1 after it,
// sent before c1's answer, is c1's rest, dropped: delivered, it opened
// c1 again, and the stop answered it a second time.
func TestConn_SharedRestInNextIncarnationOnOpenStream(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: resumeThenRestart()},
		messages.StreamingToolCall("s", "c1", "hold"), messages.ToolCall("s", "c0", "hold", nil),
		withID(messages.Text("s", "boom"), "c1"), withID(messages.Text("s", "again c0"), "c0"),
		messages.Text("f", "boom"), messages.ToolCall("s", "c2", "hold", nil), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c0": 1, "c1": 1, "c2": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (c1 answered once)", got, ends, want)
	}
}

// TestConn_SharedAnswerKeepsServedRecord: a Resume answers c1 on s; new
// calls c2 and c3 are served there, and a second Resume answers c2
// alone, c3 going on. A PARAM of c1 after that, sent before c1's
// answer, is c1's rest still, dropped: the record of c2's answer keeps
// c1 among its calls.
func TestConn_SharedAnswerKeepsServedRecord(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
		messages.StreamingToolCall("s", "c2", "hold"), messages.StreamingToolCall("s", "c3", "hold"),
		withID(messages.Text("s", "boom"), "c2"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c1": 1, "c2": 1, "c3": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (c1 answered once)", got, ends, want)
	}
}

// TestConn_EndOfCallReusingClosingID: the Logic's END of c1 closes s; a
// new call with c1's id (a model's next response, opened by a PARAM)
// opens s again, and the Logic's END of it is that call's, passed on
// and closing s: not taken for a second END of the first c1 (see
// openStreams.secondEnd), which left the new call open for the stop to
// answer.
func TestConn_EndOfCallReusingClosingID(t *testing.T) {
	got := stopAnswers(t, messages.ToolCall("s", "c1", "t", nil),
		paramOf("c1"), withID(messages.Text("s", "again c1"), "c1"))
	if want := []string{"END/c1[]", "END/c1[]"}; !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q (each c1 ended by the Logic)", got, want)
	}
}

// resumeThenRestart is a strategy that resumes the first failure and
// restarts on the others.
func resumeThenRestart() *supervisor.Strategy {
	var failures atomic.Int32
	return supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive {
		if failures.Add(1) == 1 {
			return supervisor.Resume
		}
		return supervisor.Restart
	}})
}

// TestConn_ArgsCompleteKeptByReplacingRecord: a Resume answers c1 on s,
// whose caller's tool_complete comes after; a new call c2 is served
// there, and a restart answers it. The record of c2's answer keeps c1
// among its calls, its arguments complete: a PARAM with c1's id in the
// next incarnation is a new call, which the stop answers.
func TestConn_ArgsCompleteKeptByReplacingRecord(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: resumeThenRestart()},
		messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
		messages.ToolComplete("s", "c1"), messages.StreamingToolCall("s", "c2", "hold"),
		messages.Text("f", "boom"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c1": 2, "c2": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}
