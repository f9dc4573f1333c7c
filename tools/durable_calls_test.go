package tools_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// withCall returns f with tool-call id call.
func withCall(f *messages.Frame, call string) *messages.Frame {
	f.ToolCallId = call
	return f
}

// TestDurableRouter_EndOfOneCallLeavesTheStreamOpen: the consumer has two
// calls open on stream o (frames of tool-call ids x and y) and the model
// ends x alone (an END with its id): the stream stays open for y, to the
// router as to the runtime. A restore frame's call on o is then announced
// at once, as on any stream the consumer has a call open on, and o is not
// closed. Once the model ends the stream (an END of no id), a restore's
// call there waits for the consumer to write on o again.
func TestDurableRouter_EndOfOneCallLeavesTheStreamOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		send(t, h.conn, withCall(messages.Text("o", "x"), "x"), withCall(messages.Text("o", "y"), "y"))
		streamUntil(t, h.conn, "o", isText("y"))
		send(t, h.conn, withCall(messages.End("o"), "x")) // the model echoes it: x ends
		streamUntil(t, h.conn, "o", isEnd)

		restore, err := tools.RestoreFrame("z", "r1", restoredState("z", "o"))
		if err != nil {
			t.Fatal(err)
		}
		send(t, h.conn, restore)
		_, seen := waitState(t, h.conn, "z", "restored")
		seen = append(seen, probe(t, h.conn, "p")...)
		on := onStream(seen, "o")
		if !slices.ContainsFunc(on, func(f *messages.Frame) bool { return isState(f, "restored") }) {
			t.Errorf("the restore's call on o, where call y is open, not announced at once: o got %q", lines(on))
		}
		if slices.ContainsFunc(on, isEnd) {
			t.Errorf("o, where call y is open, closed by the restore: %q", lines(on))
		}

		send(t, h.conn, messages.End("o")) // the model echoes it: o ends
		streamUntil(t, h.conn, "o", isEnd)
		restore, err = tools.RestoreFrame("z", "r1", restoredState("z", "o"))
		if err != nil {
			t.Fatal(err)
		}
		send(t, h.conn, restore)
		_, seen = waitState(t, h.conn, "z", "restored")
		seen = append(seen, probe(t, h.conn, "q")...)
		if slices.ContainsFunc(onStream(seen, "o"), func(f *messages.Frame) bool { return isState(f, "restored") }) {
			t.Errorf("the restore's call on o, which the model ended, announced at once: o got %q", lines(onStream(seen, "o")))
		}
		send(t, h.conn, messages.Text("o", "back"))
		if ev, _ := waitState(t, h.conn, "o", "restored"); !slices.Equal(ev.ToolCallIDs, []string{"call_o"}) {
			t.Errorf("restored on o once written on: %+v", ev)
		}
	})
}

// TestDurableRouter_EndOfOneCallKeepsTheEchoExpected: the result of a
// call ended at the limit on a closed stream goes into the model, which
// echoes it late; meanwhile the consumer opens two calls on the stream
// (x and y) and the model ends x alone, by an END of its id or, as the
// runtime answers one call of several, by an ERROR and an END of its id
// (x is open until its END). The stream goes on with y, so the model may
// still echo the ended call's result there: that echo does not go out,
// as it would not before x ended.
func TestDurableRouter_EndOfOneCallKeepsTheEchoExpected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		endsX []*messages.Frame
	}{
		{"END", []*messages.Frame{withCall(messages.End("s"), "x")}},
		{"ERROR and END", []*messages.Frame{withCall(messages.Error("s", "x failed"), "x"), withCall(messages.End("s"), "x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := endedAtTheLimit(t, holdModel)

				send(t, h.conn, withCall(messages.Text("s", "x"), "x"), withCall(messages.Text("s", "y"), "y"))
				streamUntil(t, h.conn, "s", isText("y"))
				send(t, h.conn, tc.endsX...) // the model echoes it: x ends, y goes on
				streamUntil(t, h.conn, "s", isEnd)

				send(t, h.conn, messages.Text("s", "release")) // the model echoes call_a's result, then the text
				out := streamUntil(t, h.conn, "s", isText("release"))
				if slices.ContainsFunc(out, func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_TOOL_RESULT }) {
					t.Errorf("stream s, where call y goes on, got %q: want the echo of the ended call_a's result kept in", lines(out))
				}
			})
		})
	}
}

// TestDurableRouter_EndOfOneCallLeavesTheOthersPending: the consumer has
// calls x and y open on stream o, and the model streams calls call_a and
// call_b there. The model's END of x alone (the stream goes on with y)
// leaves the model's calls pending: their arguments still come, and
// call_a runs with them. The model's END of call_b alone ends call_b
// (answered as invalid arguments, as at the end of the stream), for good:
// a restart does not recover it.
func TestDurableRouter_EndOfOneCallLeavesTheOthersPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		send(t, h.conn, withCall(messages.Text("o", "x"), "x"), withCall(messages.Text("o", "y"), "y"))
		streamUntil(t, h.conn, "o", isText("y"))
		send(t, h.conn, messages.StreamingToolCall("o", "call_a", "record"), messages.ToolArgChunk("o", "call_a", argsA[:9]),
			messages.StreamingToolCall("o", "call_b", "record"))
		waitState(t, h.conn, "o", "started")
		waitState(t, h.conn, "o", "started")

		send(t, h.conn, withCall(messages.End("o"), "x")) // the model echoes it: x ends, y goes on
		streamUntil(t, h.conn, "o", isEnd)
		send(t, h.conn, messages.ToolArgChunk("o", "call_a", argsA[9:]), messages.ToolComplete("o", "call_a"))
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("after the END of x alone, the model got %s: want call_a run with its arguments", line(r))
		}

		send(t, h.conn, withCall(messages.End("o"), "call_b")) // the model echoes it: call_b ends
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_b" || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Fatalf("after the END of call_b alone, the model got %s: want call_b answered as invalid arguments", line(r))
		}
		if ev, _ := waitState(t, h.conn, "o", "call_ended"); ev.ToolCallID != "call_b" || ev.StreamPending != 0 {
			t.Errorf("state at the END of call_b: %+v", ev)
		}
		synctest.Wait()
		if len(h.got) != 0 {
			t.Errorf("the model got more: %s", line(<-h.got))
		}

		// The end of call_b alone is persisted: a restart recovers the
		// call pending on o then, and not call_b.
		send(t, h.conn, messages.StreamingToolCall("o", "call_c", "record"))
		waitState(t, h.conn, "o", "started")
		h.restart("p")
		send(t, h.conn, messages.Text("o", "back"))
		if ev, _ := waitState(t, h.conn, "o", "recovered"); !slices.Equal(ev.ToolCallIDs, []string{"call_c"}) {
			t.Errorf("recovered on o: %+v, want call_c alone", ev)
		}
	})
}

// TestDurableRouter_CancelOutlivesTheEndOfOneCall: the consumer, with
// calls x and y open on stream o, cancels the whole stream; the model,
// which had not seen the CANCEL yet, starts call_a there. The model's END
// of x alone leaves call_a pending, and its END of the stream then cuts
// it short: it is answered as cancelled, as the CANCEL of the stream
// says, not as invalid arguments, once, and its end is persisted: a
// restart does not recover it.
func TestDurableRouter_CancelOutlivesTheEndOfOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startLimited(t, restartSupervised, time.Hour)
		send(t, h.conn, withCall(messages.Text("o", "x"), "x"), withCall(messages.Text("o", "y"), "y"))
		streamUntil(t, h.conn, "o", isText("y"))
		send(t, h.conn, messages.Cancel("o", ""), messages.StreamingToolCall("o", "call_a", "record"),
			withCall(messages.End("o"), "x"))
		streamUntil(t, h.conn, "o", isEnd)
		results(t, h.got, 0)

		send(t, h.conn, messages.End("o"))
		if ev, _ := waitState(t, h.conn, "o", "stream_ended"); ev.StreamPending != 0 {
			t.Errorf("state at the END of o: %+v", ev)
		}
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" || tools.KindOf(r) != tools.FailureCancelled {
			t.Fatalf("after the END of stream o, the model got %s: want call_a answered as cancelled", line(r))
		}
		h.restart("p")
		notRecovered(t, h.conn, "o")
	})
}
