package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// startGated starts a supervised limitedRouter (limit an hour) around the
// model that model makes, whose record tool returns only once release is
// closed (or its call is cancelled).
func startGated(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (h *limitedRouter, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	tool, err := tools.New(tools.Definition{Name: "record", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]bool{"ok": true}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return startLimitedTool(t, restartSupervised, time.Hour, model, memstore.New(nil), tool), release
}

// finishModel is resultsModel that, for a META frame named "start"
// written into it, starts a streaming call of record, call_m, on its
// stream, and for one named "finish" completes call_m with arguments,
// instead of echoing them.
func finishModel(got chan<- *messages.Frame) actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.GetType() == messages.FrameType_TOOL_RESULT:
			got <- f
		case f.GetType() == messages.FrameType_META && f.GetName() == "start":
			emit(messages.StreamingToolCall(f.GetStreamId(), "call_m", "record"))
			return
		case f.GetType() == messages.FrameType_META && f.GetName() == "finish":
			emit(messages.ToolArgChunk(f.GetStreamId(), "call_m", `{"id":"m"}`))
			emit(messages.ToolComplete(f.GetStreamId(), "call_m"))
			return
		}
		emit(f)
	})
}

// isResultOf returns whether a frame is the TOOL_RESULT of call.
func isResultOf(call string) func(*messages.Frame) bool {
	return func(f *messages.Frame) bool {
		return f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == call
	}
}

// TestDurableRouter_CallRunOnAClosedStreamStaysIn: the model starts and
// completes call_m on a stream a restart closed, so the consumer is told
// of no such call, and it runs. The consumer writes on the stream again
// while it runs: the echo of its result, which comes after that, does
// not go out, as that of any call of the closed stream: whether the
// router expects the echo is decided when the call runs, not when its
// result comes.
func TestDurableRouter_CallRunOnAClosedStreamStaysIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, release := startGated(t, finishModel)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"))
		waitState(t, h.conn, "s", "started")
		h.restart("p") // call_a is recovered, and s closed

		send(t, h.conn, messages.Meta("s", "start", nil), messages.Meta("s", "finish", nil)) // call_m runs
		synctest.Wait()
		send(t, h.conn, messages.Text("s", "back"))
		if ev, _ := waitState(t, h.conn, "s", "recovered"); !slices.Equal(ev.ToolCallIDs, []string{"call_a"}) {
			t.Errorf("recovered on s: %+v, want call_a alone", ev)
		}
		close(release)
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_m" || r.IsErrorResult() {
			t.Fatalf("the model got %s, want call_m's result", line(r))
		}
		send(t, h.conn, messages.Text("s", "after"))
		if out := streamUntil(t, h.conn, "s", isText("after")); slices.ContainsFunc(out, isResultOf("call_m")) {
			t.Errorf("stream s got %q: the consumer, told of no call_m there, got its result", lines(out))
		}
	})
}

// TestDurableRouter_CallRunOnAnOpenStreamGoesOut: call_a runs on stream s,
// where the consumer was told it started and completed; the model then
// ends s, and a restore frame puts a call on s, which closes it, while
// call_a still runs. Its result comes while s is closed and its model
// echoes it only once the consumer has written on s again: the echo goes
// out, as that of any call of an open stream.
func TestDurableRouter_CallRunOnAnOpenStreamGoesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, release := startGated(t, holdModel)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA),
			messages.ToolComplete("s", "call_a"))
		waitState(t, h.conn, "s", "completed")
		send(t, h.conn, messages.End("s")) // the model echoes it: s ends
		streamUntil(t, h.conn, "s", isEnd)
		restore, err := tools.RestoreFrame("z", "r1", restoredState("z", "s"))
		if err != nil {
			t.Fatal(err)
		}
		send(t, h.conn, restore)
		waitState(t, h.conn, "z", "restored") // s, which the consumer has no call open on, is closed

		close(release)
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("the model got %s, want call_a's result", line(r))
		}
		send(t, h.conn, messages.Text("s", "release")) // the model echoes call_a's result, then the text
		if out := streamUntil(t, h.conn, "s", isText("release")); !slices.ContainsFunc(out, isResultOf("call_a")) {
			t.Errorf("stream s written on again got %q: want the echo of call_a's result, a call it was told of", lines(out))
		}
	})
}

// twiceModel is holdModel that echoes each result it holds twice.
func twiceModel(got chan<- *messages.Frame) actors.Spec {
	var held []*messages.Frame
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.GetType() == messages.FrameType_TOOL_RESULT:
			got <- f
			held = append(held, f)
			return
		case f.GetType() == messages.FrameType_TEXT && f.GetText() == "release":
			for _, r := range held {
				if r.GetStreamId() == f.GetStreamId() {
					emit(r)
					emit(r)
				}
			}
			held = slices.DeleteFunc(held, func(r *messages.Frame) bool { return r.GetStreamId() == f.GetStreamId() })
		}
		emit(f)
	})
}

// TestDurableRouter_EchoTwiceStaysIn: a model that echoes the result of
// a call ended at the limit on a closed stream twice, once the consumer
// has written there again, has neither echo go out: the consumer, told
// of no such call, gets no result of it. The model's new call of the same
// id there is the consumer's: its result goes out.
func TestDurableRouter_EchoTwiceStaysIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := endedAtTheLimit(t, twiceModel)

		send(t, h.conn, messages.Text("s", "release"))
		if out := streamUntil(t, h.conn, "s", isText("release")); len(out) != 1 {
			t.Errorf("stream s written on again got %q, want the echo of its text alone", lines(out))
		}
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA),
			messages.ToolComplete("s", "call_a"))
		waitState(t, h.conn, "s", "completed")
		if r := nextResult(t, h.got); r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("the model got %s, want the new call_a's result", line(r))
		}
		send(t, h.conn, messages.Text("s", "release"))
		out := streamUntil(t, h.conn, "s", isText("release"))
		if n := len(slices.DeleteFunc(out, func(f *messages.Frame) bool { return !isResultOf("call_a")(f) })); n != 2 {
			t.Errorf("stream s got %d echoes of the new call_a's result, want the model's two", n)
		}
	})
}
