package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// TestCallRunner_CancelAssemblingCall: a CANCEL of a streaming call whose
// arguments are still arriving answers it at once with one cancelled
// result and closes its stream: the handler never runs, and the rest of
// the call (chunks, completion) gets no second result and leaves the
// stream closed.
func TestCallRunner_CancelAssemblingCall(t *testing.T) {
	rt := newRuntime(t)
	conn, ran := startSlowPingRunner(t, rt)
	if err := conn.SendAll(messages.StreamingToolCall("s", "c1", "slow"), messages.ToolArgChunk("s", "c1", "{"),
		messages.Cancel("s", "c1"),
		messages.ToolArgChunk("s", "c1", "}"), messages.ToolComplete("s", "c1"),
		messages.ToolCall("m", "m", "ping", nil)); err != nil {
		t.Fatal(err)
	}
	got := untilResult(t, conn, "m") // the runner has taken every frame of s
	got = append(got, drain(t, conn)...)
	var onS []*messages.Frame
	for _, f := range got {
		if f.GetStreamId() == "s" {
			onS = append(onS, f)
		}
	}
	if len(onS) < 2 || onS[0].GetType() != messages.FrameType_TOOL_RESULT || onS[0].GetToolCallId() != "c1" ||
		tools.KindOf(onS[0]) != tools.FailureCancelled || onS[1].GetType() != messages.FrameType_END {
		t.Fatalf("on s: %q, want c1's cancelled result, then END", lines(onS))
	}
	// What of c1 came after the CANCEL is dropped: each such frame is
	// closed again at once (END), nothing else.
	for _, f := range onS[1:] {
		if f.GetType() != messages.FrameType_END {
			t.Errorf("on s after c1's result: %s (all: %q)", line(f), lines(onS))
		}
	}
	select {
	case <-ran:
		t.Error("the cancelled call ran")
	default:
	}
}

// runnerOnRecorder starts a call runner of tools on a Recorder.
func runnerOnRecorder(t *testing.T, r *actorstest.Recorder, ts ...*tools.Tool) actors.Logic {
	t.Helper()
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	l := spec.New()
	if err := r.Deliver(l, actors.Started{}); err != nil {
		t.Fatal(err)
	}
	return l
}

// deliverAll delivers msgs to l in order.
func deliverAll(t *testing.T, r *actorstest.Recorder, l actors.Logic, msgs ...any) {
	t.Helper()
	for _, m := range msgs {
		if err := r.Deliver(l, m); err != nil {
			t.Fatalf("delivering %v: %v", m, err)
		}
	}
}

// TestCallRunner_AbortAnswersAssemblingAndRunningCalls: an ABORT of a
// stream with a call running on its tool's actor and a call still
// receiving its arguments answers each once, the assembling one at once
// (it is the runner's own to answer), and closes the stream with END
// once the running call's answer is out, though the caller sends nothing
// more of the stream.
func TestCallRunner_AbortAnswersAssemblingAndRunningCalls(t *testing.T) {
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	var r actorstest.Recorder
	l := runnerOnRecorder(t, &r, slow)
	run := messages.ToolCall("s", "r", "slow", raw(`{}`))
	deliverAll(t, &r, l, run, messages.StreamingToolCall("s", "a", "slow"), messages.ToolArgChunk("s", "a", `{"x":`))
	if len(r.Sent) != 1 || len(r.Emitted) != 0 {
		t.Fatalf("before the ABORT: %d frames sent to tools, %q emitted", len(r.Sent), lines(r.Emitted))
	}
	abort := messages.Abort("s")
	deliverAll(t, &r, l, abort)
	if len(r.Sent) != 2 || r.Sent[1].Frame != abort || r.Sent[1].To != r.Sent[0].To {
		t.Fatalf("the ABORT did not reach the running call's tool: sent %+v", r.Sent)
	}
	if len(r.Emitted) != 1 || r.Emitted[0].GetToolCallId() != "a" || tools.KindOf(r.Emitted[0]) != tools.FailureCancelled {
		t.Fatalf("after the ABORT: %q, want a's cancelled result alone (r still runs)", lines(r.Emitted))
	}
	// The tool answers r as its actor does, with the END closing the call.
	var tr actorstest.Recorder
	tl := slow.Logic()
	deliverAll(t, &tr, tl, run, abort)
	for _, f := range tr.Emitted {
		deliverAll(t, &r, l, actors.ChildFrame{Child: r.Sent[0].To, Frame: f})
	}
	if len(r.Emitted) != 3 || r.Emitted[1].GetToolCallId() != "r" || tools.KindOf(r.Emitted[1]) != tools.FailureCancelled ||
		r.Emitted[2].GetType() != messages.FrameType_END || r.Emitted[2].GetStreamId() != "s" {
		t.Fatalf("emitted %q, want a's and r's cancelled results, then END", lines(r.Emitted))
	}
	// Nothing of the stream is left: a late completion of a is dropped,
	// and only closes again what it opened.
	r.Emitted = nil
	deliverAll(t, &r, l, messages.ToolComplete("s", "a"))
	if len(r.Sent) != 2 || len(r.Emitted) != 1 || r.Emitted[0].GetType() != messages.FrameType_END {
		t.Errorf("a's late completion: %d sent, %q emitted, want END alone", len(r.Sent)-2, lines(r.Emitted))
	}
}

// TestCallRunner_CancelOneAssemblingCall: a CANCEL naming one of a
// stream's assembling calls answers that one; the other goes on
// assembling and runs at its completion, and the stream is closed after
// its result.
func TestCallRunner_CancelOneAssemblingCall(t *testing.T) {
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true, Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		return args, nil
	}})
	var r actorstest.Recorder
	l := runnerOnRecorder(t, &r, echo)
	deliverAll(t, &r, l, messages.StreamingToolCall("s", "a", "echo"), messages.StreamingToolCall("s", "b", "echo"),
		messages.ToolArgChunk("s", "a", "{"), messages.ToolArgChunk("s", "b", "{"),
		messages.Cancel("s", "a"))
	if len(r.Emitted) != 1 || r.Emitted[0].GetToolCallId() != "a" || tools.KindOf(r.Emitted[0]) != tools.FailureCancelled {
		t.Fatalf("after the CANCEL of a: %q, want a's cancelled result alone", lines(r.Emitted))
	}
	deliverAll(t, &r, l, messages.ToolArgChunk("s", "a", "}"), messages.ToolArgChunk("s", "b", "}"), messages.ToolComplete("s", "b"))
	if len(r.Emitted) != 3 || r.Emitted[1].GetToolCallId() != "b" || tools.KindOf(r.Emitted[1]) != "" ||
		r.Emitted[2].GetType() != messages.FrameType_END {
		t.Fatalf("emitted %q, want a's cancelled result, b's result, then END", lines(r.Emitted))
	}
}

// TestCallRunner_CancelClosesIdleStream: a CANCEL or ABORT of a stream
// the runner owes nothing but its END (a frame that is no call opened
// it) closes it: the caller is done with it.
func TestCallRunner_CancelClosesIdleStream(t *testing.T) {
	for _, stop := range []*messages.Frame{messages.Abort("s"), messages.Cancel("s", ""), messages.Cancel("s", "gone")} {
		t.Run(stop.GetType().String()+"_"+stop.GetToolCallId(), func(t *testing.T) {
			var r actorstest.Recorder
			l := runnerOnRecorder(t, &r)
			deliverAll(t, &r, l, messages.Text("s", "not a call"), stop)
			if len(r.Emitted) != 1 || r.Emitted[0].GetType() != messages.FrameType_END {
				t.Fatalf("emitted %q, want END", lines(r.Emitted))
			}
		})
	}
}
