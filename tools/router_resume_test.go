package tools_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/telemetry"
)

// routerFailsOnBoom is a router's Logic that fails on a META named
// "boom" written into it: it stands in for whatever, in a frame of the
// consumer's call, fails the router. The rest goes to the router.
type routerFailsOnBoom struct{ *actors.WrapperLogic }

func (l routerFailsOnBoom) Receive(c actors.Context, msg any) {
	if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_META && f.GetName() == "boom" {
		panic("boom")
	}
	l.WrapperLogic.Receive(c, msg)
}

// startResumedRouter is startEchoRouter with a router that fails on a
// META named "boom" (see routerFailsOnBoom), under a runtime whose
// supervisor resumes every failed duplex.
func startResumedRouter(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec) (*actors.Conn, chan *messages.Frame) {
	t.Helper()
	return startResumedRouterAs(t, model, func(spec actors.Spec) actors.Spec { return spec })
}

// startResumedRouterAs is startResumedRouter with the router's spec
// dressed by dress (a telemetry tap, say) once it fails on "boom".
func startResumedRouterAs(t *testing.T, model func(got chan<- *messages.Frame) actors.Spec, dress func(actors.Spec) actors.Spec) (*actors.Conn, chan *messages.Frame) {
	t.Helper()
	spec, got := echoRouter(t, model)
	newLogic := spec.New
	spec.New = func() actors.Logic { return routerFailsOnBoom{newLogic().(*actors.WrapperLogic)} }
	spec = dress(spec)
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{
		Decider: func(error) supervisor.Directive { return supervisor.Resume }})})
	return start(t, rt, spec), got
}

// cancelEndsModel is startModel that, cancelled on a stream, ends it,
// and a word of its answer, on its way, comes after that END.
func cancelEndsModel(got chan<- *messages.Frame) actors.Spec {
	start := startFrames(got)
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_CANCEL {
			emit(messages.End(f.GetStreamId()))
			emit(messages.Text(f.GetStreamId(), "late"))
			return
		}
		start(f, emit)
	})
}

// TestStreamingRouter_KeepsTheStreamsItsRuntimeKeepsThroughAResume: the
// consumer's call X on stream s fails the router, whose supervisor
// resumes it: the runtime answers X (ERROR and END) and cancels it. The
// model, cancelled, ends s and still writes on it: the runtime drops
// both, X having its answer, so for it s is closed, and streams a and b,
// opened next, are the two it keeps apart, never forgotten. The router
// takes s as its runtime does: b, quiet, is kept through 1400 quiet
// streams, and the model's END of the consumer's call X there ends X
// alone, as for the runtime. call_m, which the model streams on b, stays
// pending and runs with its arguments: it gets its result, once, rather
// than "invalid arguments" while the model still streams it.
func TestStreamingRouter_KeepsTheStreamsItsRuntimeKeepsThroughAResume(t *testing.T) {
	conn, got := startResumedRouter(t, cancelEndsModel)
	keepsTheStreamsItsRuntimeKeepsThroughAResume(t, conn, got)
}

// TestStreamingRouter_TappedKeepsTheStreamsItsRuntimeKeepsThroughAResume
// is TestStreamingRouter_KeepsTheStreamsItsRuntimeKeepsThroughAResume
// with the router under a telemetry tap, which stands between the
// router and its runtime: the router still learns which of its frames
// the runtime dropped, and the Resume's answer.
func TestStreamingRouter_TappedKeepsTheStreamsItsRuntimeKeepsThroughAResume(t *testing.T) {
	tel, err := telemetry.New(&telemetry.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	conn, got := startResumedRouterAs(t, cancelEndsModel, tel.Agent)
	keepsTheStreamsItsRuntimeKeepsThroughAResume(t, conn, got)
}

func keepsTheStreamsItsRuntimeKeepsThroughAResume(t *testing.T, conn *actors.Conn, got chan *messages.Frame) {
	t.Helper()

	send(t, conn, withCall(messages.Text("s", "X"), "X"))
	streamUntil(t, conn, "s", isText("X"))
	send(t, conn, withCall(messages.Meta("s", "boom", nil), "X"))
	answer := streamUntil(t, conn, "s", isEnd)
	if len(answer) != 2 || answer[0].GetType() != messages.FrameType_ERROR || answer[0].GetToolCallId() != "X" ||
		answer[0].GetMeta().GetFailureKind() != actors.FailedKind || answer[1].GetToolCallId() != "X" {
		t.Fatalf("after the failure of X, stream s got %q, want the Resume's ERROR and END of X", lines(answer))
	}
	// The echo of a META, which opens no stream, follows what the model
	// wrote on s once cancelled.
	send(t, conn, messages.Meta("p", "sync", nil))
	streamUntil(t, conn, "p", func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_META })

	quietStreams(t, conn, "a", "b") // the runtime keeps them apart, never forgotten
	quietRounds(t, conn, 0, 1400)

	if r := endXWithCallM(t, conn, got, "b"); r != nil {
		t.Fatalf("after the END of X alone (the runtime keeps stream b), the model got %s: want call_m pending", line(r))
	}
	callMRuns(t, conn, got, "b", "the END of X alone")
	send(t, conn, messages.End("b")) // the model echoes it: b ends
	streamUntil(t, conn, "b", func(f *messages.Frame) bool { return isEnd(f) && f.GetToolCallId() == "" })
	send(t, conn, messages.Text("p", "probe"))
	streamUntil(t, conn, "p", isText("probe"))
	select {
	case r := <-got:
		t.Fatalf("after call_m's result and the end of its stream, the model got %s: want nothing more", line(r))
	default:
	}
}

// TestStreamingRouter_EndsWithItsRuntimeACallAResumeAnsweredAlone: the
// consumer has calls X and Y open on stream s, where the model streams
// call_m, and a frame of X fails the router, whose supervisor resumes
// it: the runtime answers X alone (ERROR and END of its id), s going on
// with Y. The model's END of Y, the stream's sole call left, then ends
// s, for the runtime and for the router: call_m is answered (invalid
// arguments) at once, rather than left pending on a stream that is
// closed.
func TestStreamingRouter_EndsWithItsRuntimeACallAResumeAnsweredAlone(t *testing.T) {
	conn, got := startResumedRouter(t, startModel)
	endsWithItsRuntimeACallAResumeAnsweredAlone(t, conn, got)
}

func endsWithItsRuntimeACallAResumeAnsweredAlone(t *testing.T, conn *actors.Conn, got chan *messages.Frame) {
	t.Helper()
	send(t, conn, withCall(messages.Text("s", "X"), "X"), withCall(messages.Text("s", "Y"), "Y"), messages.Meta("s", "start", nil))
	streamUntil(t, conn, "s", isText("Y"))
	send(t, conn, withCall(messages.Meta("s", "boom", nil), "X"))
	answer := streamUntil(t, conn, "s", isEnd)
	if last := answer[len(answer)-1]; last.GetToolCallId() != "X" {
		t.Fatalf("after the failure of X, stream s got %q, want the Resume's END of X alone", lines(answer))
	}

	endEndsCallM(t, conn, got, withCall(messages.End("s"), "Y"), "the END of Y, the stream's sole call left") // the model echoes it
}
