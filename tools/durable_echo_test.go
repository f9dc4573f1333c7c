package tools_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

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

// TestDurableRouter_ClosedStreamsAreBounded: restore frames that each put
// a call on a stream of their own, which the consumer never opened,
// close those streams one after the other; each restore drops the call
// of the one before. The router keeps silent no more than the last 256
// such streams without a pending call: the model's frames on the first
// (a TICK it echoes) go out again, while a recent one, and the one whose
// call is pending, stay silent.
func TestDurableRouter_ClosedStreamsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		const n = 300
		stream := func(i int) string { return fmt.Sprintf("u%d", i) }
		for i := range n {
			restore, err := tools.RestoreFrame("x", "r1", restoredState(stream(i)))
			if err != nil {
				t.Fatal(err)
			}
			send(t, h.conn, restore)
		}
		last, recent, first := stream(n-1), stream(n-10), stream(0)
		send(t, h.conn, messages.Tick(last), messages.Tick(recent), messages.Tick(first))
		seen := probe(t, h.conn, "p")
		if got := onStream(seen, first); !slices.Equal(typesOf(got), []string{"TICK"}) {
			t.Errorf("the first stream closed, quiet for %d restores, got %q: want the TICK echoed", n-1, lines(got))
		}
		for _, s := range []string{last, recent} {
			if got := onStream(seen, s); len(got) != 0 {
				t.Errorf("closed stream %s got %q", s, lines(got))
			}
		}
		// The call of the last stream still waits for its consumer.
		send(t, h.conn, messages.Text(last, "back"))
		if ev, _ := waitState(t, h.conn, last, "restored"); !slices.Equal(ev.ToolCallIDs, []string{"call_" + last}) {
			t.Errorf("restored on %s once written on: %+v", last, ev)
		}
	})
}
