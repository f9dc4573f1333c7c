package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// The tests here hold that the ERROR and END the runtime writes for a
// call it knows carry the call's tool-call id, so that a caller with
// several calls on a stream can tell which one they answer; and that
// those it writes for a stream of several calls, which answer them all,
// carry none.

// withCallID is frameName with the frame's tool-call id after a slash.
func withCallID(f *messages.Frame) string { return frameName(f) + "/" + f.GetToolCallId() }

// TestMux_RuntimesAnswersCarryTheCallID: a duplex restarts (a sibling
// failed, under AllForOne) with a streaming call open on s and two on m.
// s's ERROR and END carry its call's id; m's, which answer both its
// calls, carry none. A call then opened on s is refused with ERROR and
// END carrying its own id.
func TestMux_RuntimesAnswersCarryTheCallID(t *testing.T) {
	mb, open, restart, release := heldRestart(t)
	s, m := open("s"), open("m")
	if err := s.Send(messages.StreamingToolCall("s", "c1", "tool")); err != nil {
		t.Fatal(err)
	}
	if err := m.SendAll(messages.StreamingToolCall("m", "c3", "tool"), messages.StreamingToolCall("m", "c4", "tool")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb) // the calls are open when the restart comes
	restart()
	if err := s.Send(messages.ToolCall("s", "c2", "tool", nil)); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := queued(t, s, withCallID), []string{"ERROR(restarted)/c1", "END/c1", "ERROR(" + restartingText + ")/c2", "END/c2"}; !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q", got, want)
	}
	if got, want := queued(t, m, withCallID), []string{"ERROR(restarted)/", "END/"}; !slices.Equal(got, want) {
		t.Errorf("stream m got %q, want %q (the stream's answer, to both its calls)", got, want)
	}
	release()
}
