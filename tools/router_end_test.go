package tools_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// startEchoRouter starts a streaming router without durability around
// the model that model makes (resultsModel, say), with the record tool:
// the test plays the model through the router's sink, and got has the
// TOOL_RESULTs written into the model.
func startEchoRouter(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (*actors.Conn, chan *messages.Frame) {
	t.Helper()
	spec, got := echoRouter(t, model)
	return start(t, newRuntime(t), spec), got
}

// echoRouter returns the spec of startEchoRouter's router, and the
// channel of the TOOL_RESULTs written into its model.
func echoRouter(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (actors.Spec, chan *messages.Frame) {
	t.Helper()
	_, tool := newArgsTool(t)
	got := make(chan *messages.Frame, 16)
	spec, err := tools.NewStreamingRouter(model(got), &tools.RouterOptions{Name: "router", Tools: []*tools.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	return spec, got
}

// startWithTwoCalls is startEchoRouter, with calls x and y of the
// consumer's open on stream o (TEXT frames of their ids, which the model
// echoes).
func startWithTwoCalls(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (*actors.Conn, chan *messages.Frame) {
	t.Helper()
	conn, got := startEchoRouter(t, model)
	send(t, conn, withCall(messages.Text("o", "x"), "x"), withCall(messages.Text("o", "y"), "y"))
	streamUntil(t, conn, "o", isText("y"))
	return conn, got
}

// endOfXEndsCallM has the model end x on stream o, the consumer's sole
// call left there, and checks that the END ended the stream: call_m,
// pending there, is answered as invalid arguments.
func endOfXEndsCallM(t *testing.T, conn *actors.Conn, got chan *messages.Frame) {
	t.Helper()
	send(t, conn, withCall(messages.End("o"), "x")) // the model echoes it
	if r := results(t, got, 1)[0]; r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureInvalidArguments {
		t.Fatalf("after the END of x, the model got %s: want call_m answered as invalid arguments", line(r))
	}
}

// TestStreamingRouter_EndOfOneCallLeavesTheOthersPending: the consumer
// has calls x and y open on stream o, and the model streams calls call_a
// and call_b there. The model's END of x alone (the stream goes on with
// y) leaves the model's calls pending: their arguments still come, and
// call_a runs with them. The model's END of call_b alone ends call_b,
// answered as invalid arguments, and nothing else. An END of no id then
// ends the stream and the call still pending there.
func TestStreamingRouter_EndOfOneCallLeavesTheOthersPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, got := startWithTwoCalls(t, resultsModel)
		send(t, conn, messages.StreamingToolCall("o", "call_a", "record"), messages.ToolArgChunk("o", "call_a", argsA[:9]),
			messages.StreamingToolCall("o", "call_b", "record"))

		send(t, conn, withCall(messages.End("o"), "x")) // the model echoes it: x ends, y goes on
		streamUntil(t, conn, "o", isEnd)
		send(t, conn, messages.ToolArgChunk("o", "call_a", argsA[9:]), messages.ToolComplete("o", "call_a"))
		if r := nextResult(t, got); r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("after the END of x alone, the model got %s: want call_a run with its arguments", line(r))
		}

		send(t, conn, withCall(messages.End("o"), "call_b")) // the model echoes it: call_b ends
		if r := nextResult(t, got); r.GetToolCallId() != "call_b" || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Fatalf("after the END of call_b alone, the model got %s: want call_b answered as invalid arguments", line(r))
		}
		send(t, conn, messages.StreamingToolCall("o", "call_c", "record"), messages.ToolArgChunk("o", "call_c", argsB[:5]))
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("before the end of the stream, the model got %s", line(<-got))
		}

		send(t, conn, messages.End("o")) // the model echoes it: o ends, and call_c with it
		if r := nextResult(t, got); r.GetToolCallId() != "call_c" || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Fatalf("after the END of stream o, the model got %s: want call_c answered as invalid arguments", line(r))
		}
		synctest.Wait()
		if len(got) != 0 {
			t.Errorf("the model got more: %s", line(<-got))
		}
	})
}

// TestStreamingRouter_EndOfTheSoleCallEndsTheStream: the model's END
// with the tool-call id of the consumer's only call on a stream ends the
// stream, as one of no id does: the call the model started there, its
// arguments still coming, is answered as invalid arguments.
func TestStreamingRouter_EndOfTheSoleCallEndsTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, got := startEchoRouter(t, startModel)
		send(t, conn, withCall(messages.Text("o", "x"), "x"), messages.Meta("o", "start", nil)) // the model starts call_m
		send(t, conn, withCall(messages.End("o"), "x"))                                         // the model echoes it
		if r := nextResult(t, got); r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Fatalf("after the END of the sole call x, the model got %s: want call_m answered as invalid arguments", line(r))
		}
		streamUntil(t, conn, "o", isEnd)
	})
}

// TestStreamingRouter_CancelOutlivesTheEndOfOneCall: the consumer, with
// calls x and y open on stream o, cancels the whole stream; the model,
// which had not seen the CANCEL yet, starts call_a there. The model's END
// of x alone leaves call_a pending, and its END of the stream then cuts
// it short: it is answered as cancelled, as the CANCEL of the stream
// says, not as invalid arguments.
func TestStreamingRouter_CancelOutlivesTheEndOfOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, got := startWithTwoCalls(t, resultsModel)
		send(t, conn, messages.Cancel("o", ""), messages.StreamingToolCall("o", "call_a", "record"),
			withCall(messages.End("o"), "x"))
		streamUntil(t, conn, "o", isEnd)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("after the END of x alone, the model got %s", line(<-got))
		}
		send(t, conn, messages.End("o"))
		if r := nextResult(t, got); r.GetToolCallId() != "call_a" || tools.KindOf(r) != tools.FailureCancelled {
			t.Fatalf("after the END of stream o, the model got %s: want call_a answered as cancelled", line(r))
		}
	})
}

// TestStreamingRouter_ErrorAndEndOfOneCallLeaveTheOthersPending: the
// consumer has calls x and y open on stream o, and the model streams
// call_a there. The model then answers x alone with an ERROR and an END
// of its id, as the runtime answers one call of several that its Resume
// answered: x is open until its END, so that END is the end of x alone,
// as the ERROR was, and the stream goes on with y: call_a, its arguments
// still coming, runs with them. An END of no id then ends the stream.
func TestStreamingRouter_ErrorAndEndOfOneCallLeaveTheOthersPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, got := startWithTwoCalls(t, resultsModel)
		send(t, conn, messages.StreamingToolCall("o", "call_a", "record"), messages.ToolArgChunk("o", "call_a", argsA[:9]))

		// The model echoes them: x ends, y goes on.
		send(t, conn, withCall(messages.Error("o", "x failed"), "x"), withCall(messages.End("o"), "x"))
		streamUntil(t, conn, "o", isEnd)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("after the ERROR and END of x alone, the model got %s", line(<-got))
		}
		send(t, conn, messages.ToolArgChunk("o", "call_a", argsA[9:]), messages.ToolComplete("o", "call_a"))
		if r := nextResult(t, got); r.GetToolCallId() != "call_a" || r.IsErrorResult() {
			t.Fatalf("after the ERROR and END of x alone, the model got %s: want call_a run with its arguments", line(r))
		}

		send(t, conn, messages.StreamingToolCall("o", "call_b", "record"), messages.End("o")) // o ends, and call_b with it
		if r := nextResult(t, got); r.GetToolCallId() != "call_b" || tools.KindOf(r) != tools.FailureInvalidArguments {
			t.Fatalf("after the END of stream o, the model got %s: want call_b answered as invalid arguments", line(r))
		}
	})
}

// TestStreamingRouter_LateChunkOfAnEndedCallOpensNothing: the consumer
// has calls x and y open on stream o, and the model ends y alone. A late
// argument chunk of y the consumer still sends opens nothing, to the
// router as to the runtime (y had its END): the model's END of x then
// ends the stream, and the call the model started there meanwhile,
// call_m, is answered as invalid arguments at once, rather than left
// waiting for an END that the stream, closed, never gets.
func TestStreamingRouter_LateChunkOfAnEndedCallOpensNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, got := startWithTwoCalls(t, startModel)
		send(t, conn, withCall(messages.End("o"), "y")) // the model echoes it: y ends, x goes on
		streamUntil(t, conn, "o", isEnd)

		// y's late chunk (the model drops it: no call of its is pending),
		// then the model starts call_m.
		send(t, conn, messages.ToolArgChunk("o", "y", "{}"), messages.Meta("o", "start", nil))
		synctest.Wait()
		endOfXEndsCallM(t, conn, got)
	})
}

// TestStreamingRouter_SecondEndOfACallEndsNoOther: the consumer has calls
// x and y open on stream o, and the model ends y alone, starts call_m,
// and ends y again. That second END ends no other call, to the router as
// to the runtime, which keeps the stream open for x: call_m, pending,
// waits. The END of x then ends the stream, and call_m with it.
func TestStreamingRouter_SecondEndOfACallEndsNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn, got := startWithTwoCalls(t, startModel)
		send(t, conn, withCall(messages.End("o"), "y"), messages.Meta("o", "start", nil), withCall(messages.End("o"), "y"))
		results(t, got, 0)
		endOfXEndsCallM(t, conn, got)
	})
}

// TestStreamingRouter_SecondEndOfAForgottenCallEndsNoOther: the consumer
// has call h and calls c0, c1... open on stream o, one more of the c
// calls than the runtime keeps of the calls ended on a stream
// (EndedMax); the model starts call_m there, ends every c call alone,
// then ends c0, forgotten by then, a second time. That END ends nothing,
// to the router as to the runtime, which keeps the stream open for h:
// call_m, its arguments still coming, runs with them and is answered
// once. The END of h then ends the stream. In a durable router as in one
// without.
func TestStreamingRouter_SecondEndOfAForgottenCallEndsNoOther(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run("durable "+strconv.FormatBool(durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var conn *actors.Conn
				var got chan *messages.Frame
				if durable {
					h := startLimitedWith(t, restartSupervised, time.Hour, startModel)
					conn, got = h.conn, h.got
				} else {
					conn, got = startEchoRouter(t, startModel)
				}
				frames := []*messages.Frame{withCall(messages.Text("o", "h"), "h")}
				var ends []*messages.Frame
				for i := range tools.EndedMax + 1 {
					c := "c" + strconv.Itoa(i)
					frames = append(frames, withCall(messages.Text("o", c), c))
					ends = append(ends, withCall(messages.End("o"), c)) // the model echoes it: c ends alone
				}
				frames = append(append(append(frames, messages.Meta("o", "start", nil)), ends...),
					withCall(messages.End("o"), "c0")) // the model echoes it: a second END of c0
				send(t, conn, frames...)
				results(t, got, 0)

				send(t, conn, messages.Meta("o", "finish", nil))
				if r := results(t, got, 1)[0]; r.GetToolCallId() != "call_m" || r.IsErrorResult() {
					t.Fatalf("after a second END of the forgotten c0, the model got %s: want call_m run with its arguments", line(r))
				}
				send(t, conn, withCall(messages.End("o"), "h")) // the model echoes it: o ends
				streamUntil(t, conn, "o", func(f *messages.Frame) bool { return isEnd(f) && f.GetToolCallId() == "h" })
				results(t, got, 0)
			})
		})
	}
}
