package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

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
	if d := tel.Dropped(); d != 0 {
		b.Fatalf("%d events dropped: the recorder fell a whole queue behind, the work measured is not the run's", d)
	}
}

// BenchmarkSDKFloor is what the SDK alone costs for the spans of one run
// of figure 7 (a): the run, 4 chat and 3 execute_tool spans with the
// attributes the taps give them, started and ended back to back on one
// goroutine, without actors, taps or recorder. Figure 7's traced row
// cannot cost less than this (plus the garbage collection it causes).
func BenchmarkSDKFloor(b *testing.B) {
	b.Run("noexport", func(b *testing.B) {
		benchSDKFloor(b, sdktrace.NewTracerProvider(), func() {})
	})
	b.Run("syncer", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		benchSDKFloor(b, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), exp.Reset)
	})
	b.Run("batcher", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		benchSDKFloor(b, tp, func() {
			tp.ForceFlush(context.Background())
			exp.Reset()
		})
	})
}

func benchSDKFloor(b *testing.B, tp *sdktrace.TracerProvider, reset func()) {
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer(ScopeName)
	finish := attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_calls"})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		at := time.Now()
		ctx, run := tr.Start(context.Background(), "invoke_agent agent", trace.WithTimestamp(at), internalKind,
			trace.WithAttributes(opInvokeAgent, attribute.String("gen_ai.agent.name", "agent"), attribute.String("gen_ai.conversation.id", "run-1")))
		for range 4 {
			_, s := tr.Start(ctx, "chat", trace.WithTimestamp(at), clientKind, trace.WithAttributes(opChat,
				attribute.String("gen_ai.provider.name", "scripted"), attribute.String("gen_ai.request.model", ""), finish))
			s.End(trace.WithTimestamp(at))
		}
		for range 3 {
			_, s := tr.Start(ctx, "execute_tool lookup", trace.WithTimestamp(at), internalKind, trace.WithAttributes(opExecuteTool,
				attribute.String("gen_ai.tool.name", "lookup"), attribute.String("gen_ai.tool.call.id", "call_1"), outcomeOK))
			s.End(trace.WithTimestamp(at))
		}
		run.End(trace.WithTimestamp(at))
		if i%64 == 63 {
			reset()
		}
	}
	reset()
}
