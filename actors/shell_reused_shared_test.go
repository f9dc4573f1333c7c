package actors

import (
	"maps"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestConn_ParamAfterSharedArgsCompleteIsNewCall: a Resume answers the
// streaming call c1 alone on s, c0 going on; its caller's META
// tool_complete comes after, the end of its arguments. A PARAM with c1's
// id after that is a new call reusing the id, which the stop answers
// with c0: dropped as c1's rest, or delivered as the rest of the call
// the Logic did not end, it got no answer.
func TestConn_ParamAfterSharedArgsCompleteIsNewCall(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.ToolCall("s", "c0", "hold", nil), messages.StreamingToolCall("s", "c1", "hold"),
		withID(messages.Text("s", "boom"), "c1"), messages.ToolComplete("s", "c1"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c0": 1, "c1": 2}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}

// TestConn_ParamAfterArgsCompleteKeptBySharedRecord: a Resume answers c1
// on s, whose caller's tool_complete comes after; new calls c2 and c3
// are served there, and a second Resume answers c2 alone, c3 going on.
// The record of c2's answer keeps c1 among its calls, its arguments
// complete: a PARAM with c1's id is a new call, which the stop answers.
func TestConn_ParamAfterArgsCompleteKeptBySharedRecord(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
		messages.ToolComplete("s", "c1"),
		messages.StreamingToolCall("s", "c2", "hold"), messages.StreamingToolCall("s", "c3", "hold"),
		withID(messages.Text("s", "boom"), "c2"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c1": 2, "c2": 1, "c3": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}

// TestConn_ParamAfterEndedArgsCompleteIsNewCall: the Logic ends c1 by its
// id on s, c0 keeping s open; c1's caller's tool_complete comes after.
// A PARAM with c1's id after that opens a new call, which the stop
// answers with c0: taken for the rest of the ended call, it got none.
func TestConn_ParamAfterEndedArgsCompleteIsNewCall(t *testing.T) {
	got := stopAnswers(t,
		messages.ToolCall("s", "c0", "hold", nil), messages.StreamingToolCall("s", "c1", "hold"),
		withID(messages.Text("s", "again c1"), "c1"), messages.ToolComplete("s", "c1"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c0": 1, "c1": 2}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}

// TestConn_ChunkAfterArgsCompleteIsRest: a Resume answers the streaming
// call c1 on s; its caller's tool_complete comes after, then a chunk of
// its arguments (of c1, sent before its answer). The chunk opens no call:
// dropped, the stop answers nothing more.
func TestConn_ChunkAfterArgsCompleteIsRest(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.StreamingToolCall("s", "c1", "hold"), withID(messages.Text("s", "boom"), "c1"),
		messages.ToolComplete("s", "c1"), messages.ToolArgChunk("s", "c1", "{}"))
	if ends, want := endsByCall(got), map[string]int{"c1": 1}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (c1 answered once)", got, ends, want)
	}
}

// TestConn_EndOfNewCallReusingSharedID: as above, and the Logic ends the
// new call c1 itself: its END is the new call's, passed on, not dropped
// as the answered c1's (see shell.mutedCalls), and the stop answers c0
// alone.
func TestConn_EndOfNewCallReusingSharedID(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Resume)},
		messages.ToolCall("s", "c0", "hold", nil), messages.StreamingToolCall("s", "c1", "hold"),
		withID(messages.Text("s", "boom"), "c1"), messages.ToolComplete("s", "c1"), paramOf("c1"),
		withID(messages.Text("s", "again c1"), "c1"))
	want := []string{"ERROR(panic in polyweave/d: boom)/c1[failed]", "END/c1[]", "END/c1[]",
		"ERROR(duplex stopped)/c0[stopped]", "END/c0[]"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q (the new call c1 ended by the Logic)", got, want)
	}
}

// TestConn_ParamAfterArgsCompleteBeforeRestartIsNewCall: the caller's
// META tool_complete of the streaming call c1 on s comes before a
// restart for another stream's failure answers c1: a PARAM with c1's id
// in the next incarnation is a new call reusing the id, which the stop
// answers. Taken for c1's rest, it got no answer.
func TestConn_ParamAfterArgsCompleteBeforeRestartIsNewCall(t *testing.T) {
	got := stopAnswersWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Restart)},
		messages.StreamingToolCall("s", "c1", "hold"), messages.ToolComplete("s", "c1"),
		messages.Text("f", "boom"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c1": 2}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}

// TestConn_ParamAfterArgsCompleteThenEndedIsNewCall: c1's caller's
// tool_complete comes, then the Logic ends c1 by its id (a tool answered
// at the end of its arguments), c0 keeping s open. A PARAM with c1's id
// after that opens a new call, which the stop answers with c0.
func TestConn_ParamAfterArgsCompleteThenEndedIsNewCall(t *testing.T) {
	got := stopAnswers(t,
		messages.ToolCall("s", "c0", "hold", nil), messages.StreamingToolCall("s", "c1", "hold"),
		messages.ToolComplete("s", "c1"), withID(messages.Text("s", "again c1"), "c0"), paramOf("c1"))
	if ends, want := endsByCall(got), map[string]int{"c0": 1, "c1": 2}; !maps.Equal(ends, want) {
		t.Errorf("stream s got %q: ENDs by call %v, want %v (the new call c1 answered by the stop)", got, ends, want)
	}
}
