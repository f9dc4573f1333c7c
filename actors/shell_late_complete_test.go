package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_LateCompletionOfCallClosedByRestart: a streaming call open at
// a restart gets its answer, the restart's ERROR and END. Its caller,
// which sends no END after a streaming call, still sends the rest of
// its arguments and their completion (the META tool_complete), which
// come once the next incarnation has started: they are the answered
// call's, dropped, so the call gets no second answer (a TOOL_RESULT
// after its END). A streaming call opened on the stream after them is
// served.
func TestMux_LateCompletionOfCallClosedByRestart(t *testing.T) {
	mb, shells, streams, send := closedCallMux(t, "r", "b")
	send(messages.StreamingToolCall("r", "call-r", "t"), messages.Text("b", "boom"))
	<-shells
	waitDrained(mb)
	if got, want := queued(t, streams["r"], frameType), []string{"ERROR", "END"}; !slices.Equal(got, want) {
		t.Fatalf("stream r, open at the restart: got %q, want %q", got, want)
	}
	send(messages.ToolArgChunk("r", "call-r", `{}`), messages.ToolComplete("r", "call-r"))
	waitDrained(mb)
	if got := queued(t, streams["r"], frameType); len(got) > 0 {
		t.Errorf("stream r after the restart answered its call: got %q, want nothing", got)
	}
	send(messages.StreamingToolCall("r", "call-r2", "t"), messages.ToolArgChunk("r", "call-r2", `{}`), messages.ToolComplete("r", "call-r2"))
	waitDrained(mb)
	if got, want := queued(t, streams["r"], frameType), []string{"TOOL_RESULT", "END"}; !slices.Equal(got, want) {
		t.Errorf("a new streaming call on r: got %q, want %q", got, want)
	}
}
