package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// The tests here hold that a frame that opens a new call on a stream
// whose call the runtime answered (a restart's ERROR and END, a
// refusal, a Resume's answer) is never dropped, though the caller sent
// no END after that call: a frame with a tool-call id other than the
// answered call's, or a TOOL_CALL, is a new call. The answered call's
// own frames still in flight (its argument chunks) are dropped.

// TestMux_NewCallOnStreamClosedByRestart: a duplex restarts while its
// child stops (a sibling failed, under AllForOne). Its streaming
// TOOL_CALL c1 on s, open at the restart, gets ERROR and END. The
// caller, which sends no END after a tool call, then sends a chunk of
// c1 still in flight (dropped: c1 has its answer) and a whole TOOL_CALL
// c2 on s: c2 is a new call, refused with ERROR and END as any call
// opened while the duplex restarts. Each ERROR and END carries the id of
// the call it answers. An id-less call (t) still ends at
// its caller's END: its TEXT then is its rest, dropped. Once the duplex
// is back, a TOOL_CALL c3 on s is served, with no END for c2 before it.
func TestMux_NewCallOnStreamClosedByRestart(t *testing.T) {
	mb, open, restart, release := heldRestart(t)
	s, txt := open("s"), open("t")
	if err := s.Send(messages.StreamingToolCall("s", "c1", "tool")); err != nil {
		t.Fatal(err)
	}
	if err := txt.Send(messages.Text("t", "hi")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb) // both calls are open when the restart comes
	restart()       // d's first incarnation has ended: d restarts, its child holding

	if err := s.SendAll(messages.ToolArgChunk("s", "c1", `{"a":`), messages.ToolCall("s", "c2", "tool", nil)); err != nil {
		t.Fatal(err)
	}
	if err := txt.Send(messages.Text("t", "more")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	// The runtime's ERROR and END carry the id of the call they answer.
	if got, want := queued(t, s, withCallID), []string{"ERROR(restarted)/c1", "END/c1", "ERROR(" + restartingText + ")/c2", "END/c2"}; !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want c1 closed by the restart and c2 refused %q", got, want)
	}
	if got, want := queued(t, txt, withCallID), []string{"ERROR(restarted)/", "END/"}; !slices.Equal(got, want) {
		t.Errorf("stream t got %q, want %q (the rest of its call dropped)", got, want)
	}

	release() // the new incarnation has started
	if err := s.Send(messages.ToolCall("s", "c3", "tool", nil)); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1] != "END" {
		f, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("stream s: %v after %q", err, got)
		}
		got = append(got, frameName(f))
	}
	if want := []string{`TOOL_RESULT("c3")`, "END"}; !slices.Equal(got, want) {
		t.Errorf("a TOOL_CALL on s after the restart got %q, want %q", got, want)
	}
}

// toolCallDuplex is a duplex "d" that fails on a TOOL_CALL to the tool
// "boom", answers any other whole TOOL_CALL with a TOOL_RESULT (its
// payload the call's id) and END, and a TEXT with TEXT "echo:" and its
// text, and END.
func toolCallDuplex() Spec {
	return Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			id := f.GetStreamId()
			switch f.GetType() {
			case messages.FrameType_TOOL_CALL:
				if f.GetName() == "boom" {
					c.Fail(errors.New("boom"))
				}
				c.Emit(messages.RawToolResult(id, f.GetToolCallId(), f.GetName(), []byte(`"`+f.GetToolCallId()+`"`)))
				c.Emit(messages.End(id))
			case messages.FrameType_TEXT:
				c.Emit(messages.Text(id, "echo:"+f.GetText()))
				c.Emit(messages.End(id))
			}
		})
	}}
}

// TestShell_ResumeServesNewCallOnAnsweredStream: a TOOL_CALL c1 fails
// the duplex, whose supervisor resumes it; the Resume answers c1 (ERROR
// of kind FailedKind, END). The caller sends no END after a tool call:
// its chunk of c1 still in flight is c1's, dropped, but its next
// TOOL_CALL on the stream, c2, is a new call, served, and so is a
// TOOL_CALL sent again with c1's id (a TOOL_CALL is a call's first
// frame: one with the answered call's id is that call sent again).
func TestShell_ResumeServesNewCallOnAnsweredStream(t *testing.T) {
	got := resumedStream(t,
		messages.ToolCall("s", "c1", "boom", nil),
		messages.ToolArgChunk("s", "c1", `{"a":`),
		messages.ToolCall("s", "c2", "tool", nil),
		messages.ToolCall("s", "c1", "tool", nil),
	)
	want := []string{"s:ERROR(boom)[" + FailedKind + "]", "s:END", `s:TOOL_RESULT("c2")`, "s:END", `s:TOOL_RESULT("c1")`, "s:END"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q", got, want)
	}
}

// TestShell_ResumedStreamsFramesOfNoIDAfterANewCall: a TOOL_CALL c1 fails
// the duplex, whose supervisor resumes it, answering c1. The caller's
// TEXT of no id that follows cannot be told from c1's rest by its id:
// it is dropped. A TOOL_CALL c2 on the stream is a new call, served, and
// ends the record of c1: a TEXT of no id after it is the stream's again,
// delivered, not dropped up to the caller's END.
func TestShell_ResumedStreamsFramesOfNoIDAfterANewCall(t *testing.T) {
	got := resumedStream(t,
		messages.ToolCall("s", "c1", "boom", nil),
		messages.Text("s", "late"),
		messages.ToolCall("s", "c2", "tool", nil),
		messages.Text("s", "after"),
	)
	want := []string{"s:ERROR(boom)[" + FailedKind + "]", "s:END", `s:TOOL_RESULT("c2")`, "s:END", "s:TEXT(echo:after)", "s:END"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q", got, want)
	}
}

// resumedStream writes frames into a toolCallDuplex whose supervisor
// resumes it, then a probe on stream g, and returns what stream s got
// up to the probe's answer.
func resumedStream(t *testing.T, frames ...*messages.Frame) []string {
	t.Helper()
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(toolCallDuplex())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(append(frames, messages.Text("g", "probe"))...); err != nil {
		t.Fatal(err)
	}
	return onStream(recvUntil(t, conn, "g", "END"), "s")
}
