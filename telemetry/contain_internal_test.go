package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// spanNames counts the exported spans by name.
func spanNames(exp *tracetest.InMemoryExporter) map[string]int {
	names := map[string]int{}
	for _, s := range exp.GetSpans() {
		names[s.Name]++
	}
	return names
}

// TestPanicInRunEnd_RunForgotten: a processor panics as a run's span
// ends. The panic is contained where the span is ended, so the run is
// forgotten as any ended run is: the next run on the same stream (a
// session's next request) is traced, not taken for the one that ended,
// and nothing stays kept for it.
func TestPanicInRunEnd_RunForgotten(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	bad := &panickingProcessor{armed: make(chan struct{}, 1)}
	tel := boundsTelemetry(t, Options{Logger: slog.New(newWarnings()),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bad), sdktrace.WithSyncer(exp))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad.armed <- struct{}{} // the run's span is the next to end
	agent.out(messages.End("s1"))
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	agent.out(messages.ToolCall("s1", "c1", "add", nil))
	agent.out(messages.RawToolResult("s1", "c1", "add", []byte(`2`)))
	agent.out(messages.End("s1"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names := spanNames(exp); names["invoke_agent a"] != 1 || names["execute_tool add"] != 1 {
		t.Errorf("spans after the panic: %v, want the second run and its call", names)
	}
	if !agent.idle() || len(tel.runs) != 0 {
		t.Errorf("after both runs ended: %d runs kept by the tap, %d by the telemetry; want none", len(agent.runs), len(tel.runs))
	}
}

// TestPanicInChatEnd_NextRequestItsOwn: a processor panics as a model
// request's span ends. The next request of the stream is answered and
// ended as itself (its span exported), not by ending again the request
// before it, and each request is measured once.
func TestPanicInChatEnd_NextRequestItsOwn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	bad := &panickingProcessor{armed: make(chan struct{}, 1)}
	tel := boundsTelemetry(t, Options{Logger: slog.New(newWarnings()),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bad), sdktrace.WithSyncer(exp)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "model"))}
	model := &modelObserver{t: tel, provider: "p"}
	bad.armed <- struct{}{} // the first request's span is the first to end
	for range 2 {
		model.in(c, messages.RawParam("s2", "model", json.RawMessage(`"m"`)))
		model.in(c, messages.End("s2"))
		model.out(messages.End("s2"))
	}
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names := spanNames(exp); names["chat m"] != 1 {
		t.Errorf("spans after the panic: %v, want the second request's", names)
	}
	if n := chatDurations(t, reader); n != 2 {
		t.Errorf("%d model requests measured, want 2", n)
	}
	if !model.idle() {
		t.Errorf("%d requests still open after both were answered", len(model.open))
	}
}

// panickingMeter is a meter provider whose duration histogram panics on
// its first Record once armed.
type panickingMeter struct {
	noop.MeterProvider
	armed chan struct{}
}

func (p *panickingMeter) Meter(string, ...metric.MeterOption) metric.Meter {
	return panickingMeterMeter{armed: p.armed}
}

type panickingMeterMeter struct {
	noop.Meter
	armed chan struct{}
}

func (m panickingMeterMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return panickingHistogram{armed: m.armed}, nil
}

type panickingHistogram struct {
	noop.Float64Histogram
	armed chan struct{}
}

func (h panickingHistogram) Record(context.Context, float64, ...metric.RecordOption) {
	select {
	case <-h.armed:
		panic("meter bug")
	default:
	}
}

// TestPanicInMeter_NextRequestItsOwn: the meter panics as a model
// request's duration is recorded (after its span ended): the next
// request of the stream still gets its own span, ended at its own end.
func TestPanicInMeter_NextRequestItsOwn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	meter := &panickingMeter{armed: make(chan struct{}, 1)}
	tel := boundsTelemetry(t, Options{Logger: slog.New(newWarnings()),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), MeterProvider: meter})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "model"))}
	model := &modelObserver{t: tel, provider: "p"}
	meter.armed <- struct{}{}
	for _, m := range []string{`"m1"`, `"m2"`} {
		model.in(c, messages.RawParam("s2", "model", json.RawMessage(m)))
		model.in(c, messages.End("s2"))
		model.out(messages.End("s2"))
	}
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names := spanNames(exp); names["chat m1"] != 1 || names["chat m2"] != 1 {
		t.Errorf("spans after the meter's panic: %v, want both requests'", names)
	}
	if !model.idle() {
		t.Errorf("%d requests still open after both were answered", len(model.open))
	}
}

// TestShutdown_EndsEverySpanPastAPanic: a processor panics as Shutdown
// ends the first of the spans still open: the others are ended still.
func TestShutdown_EndsEverySpanPastAPanic(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	bad := &panickingProcessor{armed: make(chan struct{}, 1)}
	tel := boundsTelemetry(t, Options{Logger: slog.New(newWarnings()),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bad), sdktrace.WithSyncer(exp))})
	for _, name := range []string{"a", "b", "c"} {
		c := nullContext{self: actors.RefOf(actor.NewPID("test", name))}
		agent := &agentObserver{t: tel, name: name}
		agent.in(c, messages.RawParam("s-"+name, "messages", json.RawMessage(`[]`)))
	}
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad.armed <- struct{}{}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 2 {
		t.Errorf("%d spans ended by Shutdown past the panic, want the 2 the processor did not panic on (%v)", n, spanNames(exp))
	}
}
