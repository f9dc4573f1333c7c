package tools_test

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// quietOnErrorsModel is resultsModel that does not echo error results:
// the echo of a call ended at the limit never comes, as with a model
// adapter that ignores what it cannot place, while the results of the
// calls it made since are echoed.
func quietOnErrorsModel(got chan<- *messages.Frame) actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			got <- f
			if f.IsErrorResult() {
				return
			}
		}
		emit(f)
	})
}

// TestDurableRouter_NewCallReusingAnIDIsEchoed: the model never echoes
// the result of a call ended at the limit on a closed stream; the
// consumer writes on the stream again and the model starts a new call
// with the same id (many models number the calls of each response from
// call_0): that call's result is echoed out on the stream, not taken for
// the echo of the ended call's.
func TestDurableRouter_NewCallReusingAnIDIsEchoed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, quietOnErrorsModel)

		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA),
			messages.ToolComplete("s", "call_a"))
		waitState(t, h.conn, "s", "completed")
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("result of the new call_a: %s", line(r))
		}
		send(t, h.conn, messages.Text("s", "after"))
		out := streamUntil(t, h.conn, "s", isText("after"))
		if !slices.ContainsFunc(out, func(f *messages.Frame) bool {
			return f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == "call_a" && !f.IsErrorResult()
		}) {
			t.Errorf("stream s got %q, want the new call_a's result echoed", lines(out))
		}
		if slices.ContainsFunc(out, func(f *messages.Frame) bool { return tools.KindOf(f) == tools.FailureStopped }) {
			t.Errorf("stream s got the ended call's result: %q", lines(out))
		}
	})
}
