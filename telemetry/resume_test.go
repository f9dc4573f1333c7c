package telemetry_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/telemetry"
)

// resumedModel is a model adapter that starts its answer to a request
// (a token) and, but on stream p, does not finish it; a "boom" on a
// stream fails its incarnation. endOnCancel: cancelled, it ends the
// stream, as an adapter stopping its request does.
type resumedModel struct{ endOnCancel bool }

func (m *resumedModel) Receive(c actors.Context, msg any) {
	f, ok := msg.(*messages.Frame)
	if !ok {
		return
	}
	switch id := f.GetStreamId(); {
	case f.GetType() == messages.FrameType_END:
		c.Emit(messages.Text(id, "tok"))
		if id == "p" {
			c.Emit(messages.End(id))
		}
	case f.GetType() == messages.FrameType_META && f.GetName() == "boom":
		panic("injected model failure")
	case f.GetType() == messages.FrameType_CANCEL && m.endOnCancel:
		c.Emit(messages.Text(id, "late"))
		c.Emit(messages.End(id))
	}
}

// resumedLoop is a tool loop that calls a tool at a request's messages
// and, but on stream p, waits for its result; a "boom" on a stream fails
// its incarnation. endOnCancel: cancelled, it answers the call and ends
// the stream.
type resumedLoop struct{ endOnCancel bool }

func (l *resumedLoop) Receive(c actors.Context, msg any) {
	f, ok := msg.(*messages.Frame)
	if !ok {
		return
	}
	switch id := f.GetStreamId(); {
	case f.IsParam(models.ParamMessages):
		c.Emit(messages.ToolCall(id, "call_"+id, "add", json.RawMessage(`{}`)))
		if id == "p" {
			c.Emit(toolResult(id))
			c.Emit(messages.End(id))
		}
	case f.GetType() == messages.FrameType_META && f.GetName() == "boom":
		panic("injected loop failure")
	case f.GetType() == messages.FrameType_CANCEL && l.endOnCancel:
		c.Emit(toolResult(id))
		c.Emit(messages.End(id))
	}
}

func toolResult(stream string) *messages.Frame {
	f, err := messages.ToolResult(stream, "call_"+stream, "add", 2)
	if err != nil {
		panic(err)
	}
	return f
}

// resumed is a tapped duplex whose supervisor resumes it.
type resumed struct {
	t      *testing.T
	ctx    context.Context
	tel    *telemetry.Telemetry
	exp    *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	conn   *actors.Conn
}

// startResumed starts the duplex tap makes of its Logic, in a runtime
// whose supervisor resumes a failed duplex.
func startResumed(t *testing.T, tap func(*telemetry.Telemetry) actors.Spec) *resumed {
	t.Helper()
	r := &resumed{t: t, exp: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	var err error
	r.tel, err = telemetry.New(&telemetry.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.exp)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.tel.Shutdown(context.Background()) })
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{
		Decider: func(error) supervisor.Directive { return supervisor.Resume }})})
	if r.conn, err = rt.Start(tap(r.tel)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	r.ctx = ctx
	return r
}

func (r *resumed) send(frames ...*messages.Frame) {
	r.t.Helper()
	if err := r.conn.SendAll(frames...); err != nil {
		r.t.Fatal(err)
	}
}

func (r *resumed) param(stream, name string, v any) *messages.Frame {
	r.t.Helper()
	f, err := messages.Param(stream, name, v)
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

// recvUntil returns the frames of stream received up to the first of
// type want.
func (r *resumed) recvUntil(stream string, want messages.FrameType) []*messages.Frame {
	r.t.Helper()
	var got []*messages.Frame
	for {
		f, err := r.conn.Recv(r.ctx)
		if err != nil {
			r.t.Fatalf("after %d frames: %v", len(got), err)
		}
		if f.GetStreamId() != stream {
			continue
		}
		got = append(got, f)
		if f.GetType() == want {
			return got
		}
	}
}

// fail fails the duplex with a frame of stream s, and waits for the
// runtime's answer (ERROR and END).
func (r *resumed) fail() {
	r.t.Helper()
	r.send(messages.Meta("s", "boom", nil))
	if got := r.recvUntil("s", messages.FrameType_END); got[0].GetType() != messages.FrameType_ERROR {
		r.t.Fatalf("after the failure, s got %s first, want the Resume's ERROR", messages.Format(got[0]))
	}
}

// spans returns the statuses of the spans named name, by code.
func (r *resumed) spans(name string) map[codes.Code]int {
	r.t.Helper()
	if err := r.tel.Flush(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	status := map[codes.Code]int{}
	for _, s := range r.exp.GetSpans() {
		if s.Name == name {
			status[s.Status.Code]++
		}
	}
	return status
}

// durations returns the operation durations measured, by the values of
// attrs.
func (r *resumed) durations(attrs ...string) map[string]uint64 {
	r.t.Helper()
	return histogramCounts(r.t, r.reader, telemetry.MetricOperationDuration, attrs...)
}

// noneOpen checks that Shutdown finds no span left open to end.
func (r *resumed) noneOpen() {
	r.t.Helper()
	n := len(r.exp.GetSpans())
	if err := r.tel.Shutdown(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	if extra := r.exp.GetSpans()[n:]; len(extra) > 0 {
		r.t.Errorf("Shutdown ended %d spans left open, the first %q", len(extra), extra[0].Name)
	}
}

var cancelCases = []struct {
	name        string
	endOnCancel bool
}{{"ends it when cancelled", true}, {"never ends it", false}}

// TestModel_RequestAResumeAnswered: a frame of request s fails the
// adapter, whose supervisor resumes it: the runtime answers s (ERROR and
// END) and cancels it. The request's span ends failed and its duration
// is measured once, whether the adapter then ends s (an END the runtime
// drops) or never does; a request that follows, on p, is measured on
// its own, ok, and no request is left open.
func TestModel_RequestAResumeAnswered(t *testing.T) {
	for _, tc := range cancelCases {
		t.Run(tc.name, func(t *testing.T) {
			r := startResumed(t, func(tel *telemetry.Telemetry) actors.Spec {
				return tel.Model(actors.Spec{Name: "model", New: func() actors.Logic { return &resumedModel{endOnCancel: tc.endOnCancel} }}, "scripted")
			})
			r.send(r.param("s", models.ParamModel, "m1"), messages.End("s"))
			r.recvUntil("s", messages.FrameType_TEXT)
			r.fail()
			// The adapter handles the Resume's answer and CANCEL of s
			// before p's request.
			r.send(r.param("p", models.ParamModel, "m1"), messages.End("p"))
			r.recvUntil("p", messages.FrameType_END)
			if got := r.spans("chat m1"); got[codes.Error] != 1 || got[codes.Unset] != 1 || len(got) != 2 {
				t.Errorf("chat spans by status %v, want one failed (s) and one ok (p)", got)
			}
			if got := r.durations("gen_ai.operation.name"); got["chat"] != 1+1 || len(got) != 1 {
				t.Errorf("request durations %v, want 2: one for s, one for p", got)
			}
			r.noneOpen()
		})
	}
}

// TestAgent_RunAResumeAnswered: a frame of run s, whose tool call waits
// for its result, fails the loop, whose supervisor resumes it: the
// runtime answers s (ERROR and END) and cancels it. The run's span ends
// failed, and its call's with no result and no duration measured,
// whether the loop then answers the call and ends s (frames the runtime
// drops) or never does; the call of a run that follows, on p, is
// measured once, ok, and no run is left open.
func TestAgent_RunAResumeAnswered(t *testing.T) {
	for _, tc := range cancelCases {
		t.Run(tc.name, func(t *testing.T) {
			r := startResumed(t, func(tel *telemetry.Telemetry) actors.Spec {
				return tel.Agent(actors.Spec{Name: "loop", New: func() actors.Logic { return &resumedLoop{endOnCancel: tc.endOnCancel} }})
			})
			r.send(r.param("s", models.ParamMessages, []models.Message{models.UserMessage("add")}))
			r.recvUntil("s", messages.FrameType_TOOL_CALL)
			r.fail()
			r.send(r.param("p", models.ParamMessages, []models.Message{models.UserMessage("add")}), messages.End("p"))
			r.recvUntil("p", messages.FrameType_END)
			if got := r.spans("invoke_agent loop"); got[codes.Error] != 1 || got[codes.Unset] != 1 || len(got) != 2 {
				t.Errorf("run spans by status %v, want one failed (s) and one ok (p)", got)
			}
			if got := r.spans("execute_tool add"); got[codes.Error] != 1 || got[codes.Unset] != 1 || len(got) != 2 {
				t.Errorf("tool spans by status %v, want one without result (s) and one ok (p)", got)
			}
			if got := r.durations("gen_ai.tool.name", "polyweave.tool.outcome"); got["add/ok"] != 1 || len(got) != 1 {
				t.Errorf("tool durations %v, want p's call's alone, ok", got)
			}
			r.noneOpen()
		})
	}
}
