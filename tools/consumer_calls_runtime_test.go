package tools_test

import (
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// sayModel is startModel that, for a META frame named "say" written into
// it, emits a TEXT "said" on its stream instead of echoing it (a model
// that opens a stream of its own, on which the consumer wrote no call),
// and, for one named "end", an END with its tool-call id.
func sayModel(got chan<- *messages.Frame) actors.Spec {
	start := startFrames(got)
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.GetType() == messages.FrameType_META && f.GetName() == "say":
			emit(messages.Text(f.GetStreamId(), "said"))
		case f.GetType() == messages.FrameType_META && f.GetName() == "end":
			emit(withCall(messages.End(f.GetStreamId()), f.GetToolCallId()))
		default:
			start(f, emit)
		}
	})
}

// quietStreams makes each of streams quiet on conn's router and on its
// runtime: the consumer writes a TEXT of no id and call x there, which
// the model echoes, and the model's END of x ends x alone, the frame of
// no id left open.
func quietStreams(t *testing.T, conn *actors.Conn, streams ...string) {
	t.Helper()
	frames := make([]*messages.Frame, 0, 3*len(streams))
	for _, s := range streams {
		frames = append(frames, messages.Text(s, "hi"), withCall(messages.Text(s, "x"), "x"), withCall(messages.End(s), "x"))
	}
	send(t, conn, frames...)
	streamUntil(t, conn, streams[len(streams)-1], isEnd)
}

// quietRounds makes streams o<from> to o<to-1> quiet (see quietStreams),
// a hundred at a time.
func quietRounds(t *testing.T, conn *actors.Conn, from, to int) {
	t.Helper()
	const round = 100
	for r := from; r < to; r += round {
		streams := make([]string, 0, round)
		for i := r; i < min(r+round, to); i++ {
			streams = append(streams, fmt.Sprint("o", i))
		}
		quietStreams(t, conn, streams...)
	}
}

// endXWithCallM has the consumer write call X on stream, the model start
// call_m there and then end X (its echo), and returns what the model got
// once the END of X is out: call_m's result, if that END ended the
// stream for the router, or nil.
func endXWithCallM(t *testing.T, conn *actors.Conn, got chan *messages.Frame, stream string) *messages.Frame {
	t.Helper()
	send(t, conn, withCall(messages.Text(stream, "X"), "X"), messages.Meta(stream, "start", nil))
	send(t, conn, withCall(messages.End(stream), "X"))
	streamUntil(t, conn, stream, isEnd)
	send(t, conn, messages.Text("p", "probe")) // the model has what the END brought before it
	streamUntil(t, conn, "p", isText("probe"))
	select {
	case r := <-got:
		return r
	default:
		return nil
	}
}

// TestStreamingRouter_StreamOpenedByTheModelForgottenAsTheRuntimeForgetsIt:
// the runtime counts, among the streams it keeps, those the model opens
// with what the router passes out, from the moment they go out. Stream s,
// opened by the model (a TEXT of its own there) before 1400 quiet streams,
// and made quiet by the consumer's calls after 500 of them, is forgotten by
// the runtime, which keeps the 1024 quiet streams opened last: the
// consumer's call X there then opens it anew, X its sole call, and the
// model's END of X ends the stream, for the runtime and for the router:
// call_m, which the model started there, is answered (invalid arguments)
// rather than left pending for an END the model, its stream ended, never
// sends.
func TestStreamingRouter_StreamOpenedByTheModelForgottenAsTheRuntimeForgetsIt(t *testing.T) {
	conn, got := startEchoRouter(t, sayModel)
	quietStreams(t, conn, "a", "b") // the runtime keeps them inline, never forgotten
	send(t, conn, messages.Meta("s", "say", nil))
	streamUntil(t, conn, "s", isText("said"))
	quietRounds(t, conn, 0, 500)
	quietStreams(t, conn, "s")
	quietRounds(t, conn, 500, 1400)

	endOfXEndsTheStream(t, conn, got, "s")
}

// endOfXEndsTheStream runs endXWithCallM on stream, a stream the runtime
// has forgotten, and checks that the model's END of X, the stream's sole
// call for the runtime, ended the stream for the router too: call_m is
// answered as invalid arguments, not left pending.
func endOfXEndsTheStream(t *testing.T, conn *actors.Conn, got chan *messages.Frame, stream string) {
	t.Helper()
	r := endXWithCallM(t, conn, got, stream)
	if r == nil {
		t.Fatalf("after the END of X, stream %s's sole call for the runtime, call_m is still pending: no answer came", stream)
	}
	if r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureInvalidArguments {
		t.Fatalf("after the END of X, the model got %s: want call_m answered as invalid arguments", line(r))
	}
}

// TestStreamingRouter_StreamsTheRuntimeKeepsInlineNeverForgotten: the
// runtime keeps the first streams it opens (two) apart from the others,
// and never forgets them, quiet or not. Stream a, the first, quiet, is
// kept through 1400 quiet streams: the consumer's call X there joins the
// frame of no id still open, and the model's END of X ends X alone, for
// the runtime as for the router. call_m, which the model started there,
// stays pending and runs with its arguments, rather than being answered
// as invalid arguments while the model still streams them.
func TestStreamingRouter_StreamsTheRuntimeKeepsInlineNeverForgotten(t *testing.T) {
	conn, got := startEchoRouter(t, startModel)
	quietStreams(t, conn, "a", "b")
	quietRounds(t, conn, 0, 1400)

	if r := endXWithCallM(t, conn, got, "a"); r != nil {
		t.Fatalf("after the END of X alone (the runtime keeps stream a), the model got %s: want call_m pending", line(r))
	}
	callMRuns(t, conn, got, "a", "the END of X alone")
}

// TestStreamingRouter_QuietStreamWithAPendingCallForgottenAsTheRuntimeForgetsIt:
// the runtime forgets a quiet stream however many calls of the model's are
// pending there, of which it knows nothing (the router keeps them): stream
// s, quiet, where the model started call_m, is forgotten after 1400 quiet
// streams opened after it. The consumer's call X there then opens it
// anew, X its sole call, and the model's END of X ends the stream: call_m
// is answered (invalid arguments), not left pending.
func TestStreamingRouter_QuietStreamWithAPendingCallForgottenAsTheRuntimeForgetsIt(t *testing.T) {
	conn, got := startEchoRouter(t, startModel)
	quietStreams(t, conn, "a", "b", "s")
	send(t, conn, messages.Meta("s", "start", nil), messages.Text("s", "started"))
	streamUntil(t, conn, "s", isText("started"))
	quietRounds(t, conn, 0, 1400)

	send(t, conn, withCall(messages.Text("s", "X"), "X"))
	send(t, conn, withCall(messages.End("s"), "X"))
	streamUntil(t, conn, "s", isEnd)
	if r := nextResult(t, got); r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureInvalidArguments {
		t.Fatalf("after the END of X, the model got %s: want call_m answered as invalid arguments", line(r))
	}
}

// TestStreamingRouter_EndOfACallNeverCarriedEndsNothing: the model's END
// with an id the stream never carried, while the consumer's call X is
// open there (the model's answer to a frame of no call it knows), ends
// none of the stream's calls for the runtime, also before the model
// ended any: the router takes it so too. call_m, which the model started
// there, stays pending and runs with its arguments, and the model's END
// of X then ends the stream.
func TestStreamingRouter_EndOfACallNeverCarriedEndsNothing(t *testing.T) {
	conn, got := startEchoRouter(t, sayModel)
	send(t, conn, withCall(messages.Text("s", "X"), "X"), messages.Meta("s", "start", nil))
	send(t, conn, withCall(messages.Meta("s", "end", nil), "zz"))
	streamUntil(t, conn, "s", isEnd)
	send(t, conn, messages.Text("p", "probe"))
	streamUntil(t, conn, "p", isText("probe"))
	callMRuns(t, conn, got, "s", "the END of zz, a call the stream never carried")
	send(t, conn, messages.Meta("s", "start", nil), withCall(messages.End("s"), "X"))
	if r := nextResult(t, got); r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureInvalidArguments {
		t.Fatalf("after the END of X, the stream's sole call, the model got %s: want call_m answered as invalid arguments", line(r))
	}
}

// TestStreamingRouter_SecondEndOfTheCallThatClosedItsStreamEndsNothing:
// the model's second END of X, whose END closed stream s (X its sole
// call), is dropped by the runtime, not passed on: it ends nothing, and
// the router takes it so too. call_m, which the model started on s
// after the first END, stays pending and runs with its arguments.
func TestStreamingRouter_SecondEndOfTheCallThatClosedItsStreamEndsNothing(t *testing.T) {
	conn, got := startEchoRouter(t, sayModel)
	send(t, conn, withCall(messages.Text("s", "X"), "X"), withCall(messages.End("s"), "X")) // the model echoes them
	streamUntil(t, conn, "s", isEnd)
	send(t, conn, messages.Meta("s", "start", nil), withCall(messages.Meta("s", "end", nil), "X"))
	// The first probe's echo follows the model's second END out of the
	// router; the second probe follows what the router wrote into the
	// model for that END.
	for _, probe := range []string{"probe", "probe again"} {
		send(t, conn, messages.Text("p", probe))
		streamUntil(t, conn, "p", isText(probe))
	}
	callMRuns(t, conn, got, "s", "the second END of X")
}

// endEndsCallM writes end on its stream (the model echoes it, or
// answers it with an END of its own: see sayModel) and checks that the
// model's END there ended the stream, for the router as for the
// runtime: call_m, which the model started there, is answered as
// invalid arguments at once, rather than left pending for an END the
// model, its stream ended, never sends. what names the END.
func endEndsCallM(t *testing.T, conn *actors.Conn, got chan *messages.Frame, end *messages.Frame, what string) {
	t.Helper()
	send(t, conn, end)
	streamUntil(t, conn, end.GetStreamId(), isEnd)
	send(t, conn, messages.Text("p", "probe")) // the model has what the END brought before it
	streamUntil(t, conn, "p", isText("probe"))
	select {
	case r := <-got:
		if r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Fatalf("after %s, the model got %s: want call_m answered as invalid arguments", what, line(r))
		}
	default:
		t.Fatalf("after %s, which ended the stream for the runtime, call_m is still pending: no answer came", what)
	}
}

// callMRuns checks that call_m, which the model started on stream, is
// still pending after what happened (the model got no result) and that
// it runs with its arguments once the model completes it.
func callMRuns(t *testing.T, conn *actors.Conn, got chan *messages.Frame, stream, happened string) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("after %s, the model got %s: want call_m pending", happened, line(r))
	default:
	}
	send(t, conn, messages.Meta(stream, "finish", nil))
	if r := nextResult(t, got); r.GetToolCallId() != "call_m" || r.IsErrorResult() {
		t.Fatalf("call_m completed: the model got %s, want its result", line(r))
	}
}
