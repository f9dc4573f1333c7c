package telemetry

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
)

// BenchmarkHooks is the cost of the taps and the recorder for one run (a
// run span, a chat span, a tool span).
func BenchmarkHooks(b *testing.B) {
	b.Run("noexport", func(b *testing.B) {
		benchHooks(b, sdktrace.NewTracerProvider(), nil)
	})
	b.Run("syncer", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		benchHooks(b, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), exp)
	})
	b.Run("batcher", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		benchHooks(b, sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBlocking())), exp)
	})
}

func benchHooks(b *testing.B, tp *sdktrace.TracerProvider, exp *tracetest.InMemoryExporter) {
	defer tp.Shutdown(context.Background())
	tel, err := New(&Options{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	in, out := runFrames()
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	spec := actors.Spec{Name: "x", New: func() actors.Logic { return echoLogic{out: out} }}
	agent := tap(spec, func() observer { return &agentObserver{t: tel} }).New()
	model := tap(spec, func() observer { return &modelObserver{t: tel, provider: "p"} }).New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for _, f := range in {
			agent.Receive(c, f)
			model.Receive(c, f)
		}
		if i%1024 == 1023 {
			tel.Flush(context.Background())
			if exp != nil {
				exp.Reset()
			}
		}
	}
	tel.Flush(context.Background()) // the recorder's backlog is part of the cost
}
