package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// panickingProcessor is a span processor whose OnEnd panics, once every
// time armed.
type panickingProcessor struct{ armed chan struct{} }

func (p *panickingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *panickingProcessor) OnEnd(sdktrace.ReadOnlySpan) {
	select {
	case <-p.armed:
		panic("exporter bug")
	default:
	}
}
func (p *panickingProcessor) Shutdown(context.Context) error   { return nil }
func (p *panickingProcessor) ForceFlush(context.Context) error { return nil }

// TestRecorder_PanickingProcessorContained: a span processor (or
// exporter, or meter) of the host that panics does so on the recorder's
// goroutine, where nothing would recover it and the whole host would
// die: the recorder recovers it, logs it, and goes on recording.
func TestRecorder_PanickingProcessorContained(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	bad := &panickingProcessor{armed: make(chan struct{}, 1)}
	logs := newWarnings()
	tel := boundsTelemetry(t, Options{Logger: slog.New(logs),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bad), sdktrace.WithSyncer(exp))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	bad.armed <- struct{}{}
	agent.out(messages.ToolCall("s1", "c1", "add", nil))
	agent.out(messages.RawToolResult("s1", "c1", "add", []byte(`2`)))
	agent.out(messages.ToolCall("s1", "c2", "add", nil))
	agent.out(messages.RawToolResult("s1", "c2", "add", []byte(`3`)))
	agent.out(messages.End("s1"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, s := range exp.GetSpans() {
		names[s.Name]++
	}
	if names["invoke_agent a"] != 1 || names["execute_tool add"] != 1 {
		t.Errorf("spans after the panic: %v, want the run and the second call", names)
	}
	if logs.count() == 0 {
		t.Error("the processor's panic was not logged")
	}
}
