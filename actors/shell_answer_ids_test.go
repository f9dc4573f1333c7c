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

// TestMux_RestartAnswersAStreamOfSeveralCalls: a duplex restarts (a
// sibling failed, under AllForOne) with two streaming calls open on m:
// m's ERROR and END answer both, and carry no tool-call id (a stream of
// one call has its call's: see TestMux_NewCallOnStreamClosedByRestart).
// So do they when one of the calls carries no id: one with the other
// call's id would leave it unanswered to a caller that tells calls by id.
func TestMux_RestartAnswersAStreamOfSeveralCalls(t *testing.T) {
	for _, ids := range [][2]string{{"c3", "c4"}, {"", "c4"}} {
		t.Run(ids[0]+"+"+ids[1], func(t *testing.T) {
			mb, open, restart, release := heldRestart(t)
			m := open("m")
			if err := m.SendAll(messages.StreamingToolCall("m", ids[0], "tool"), messages.StreamingToolCall("m", ids[1], "tool")); err != nil {
				t.Fatal(err)
			}
			waitDrained(mb) // the calls are open when the restart comes
			restart()
			waitDrained(mb)
			if got, want := queued(t, m, withCallID), []string{"ERROR(restarted)/", "END/"}; !slices.Equal(got, want) {
				t.Errorf("stream m got %q, want %q (the stream's answer, to both its calls)", got, want)
			}
			release()
		})
	}
}
