package main

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyweave/polyweave-go/telemetry"
)

// Figure 7 with tracing: the conversation of figure 7 (a), its loop and
// model adapter tapped by the telemetry package with spans recorded by
// the SDK into its in-memory exporter (8 spans a run: the run, 4 model
// requests, 3 tool calls), against the same conversation untraced, in
// the same run. The goal row hands the spans to the exporter through the
// SDK's batch span processor, as a host that traces in production does
// (the SDK advises against the simple one there); the in-memory exporter
// stands in for a network one so that no I/O is measured. It blocks
// instead of dropping spans when its queue is full, so that every span's
// cost is counted. An information row uses the simple (synchronous)
// processor, as tests reading an in-memory exporter do. Another row
// checks that a Telemetry with tracing off (no provider) adds no
// allocation per run; the last compares the CPU time per run, which a
// busy machine disturbs less than the time per run.

// benchTracedConversation measures runs of the figure 7 (a) conversation
// under tel (nil: untapped). flush, when set, is called every 64 runs and
// at the end, after tel's recorder is flushed: it hands the spans ended so
// far to the exporter and drops them.
func benchTracedConversation(b *testing.B, tel *telemetry.Telemetry, flush func(context.Context)) {
	lc, err := newTappedConversation(true, tel)
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	if tel != nil {
		defer tel.Shutdown(context.Background())
	}
	ctx := context.Background()
	if err := lc.run(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := range b.N {
		if err := lc.run(ctx); err != nil {
			b.Fatal(err)
		}
		if flush != nil && i%64 == 63 {
			tel.Flush(ctx)
			flush(ctx)
		}
	}
	if flush != nil { // the spans not exported yet are part of the cost
		tel.Flush(ctx)
		flush(ctx)
	}
	b.StopTimer()
	reportRuns(b, b.N, processCPU()-cpu)
}

// benchTracingOn runs the conversation with spans exported to the SDK's
// in-memory exporter, in batches (batch) or as they end.
func benchTracingOn(b *testing.B, batch bool) {
	exp := tracetest.NewInMemoryExporter()
	processor := sdktrace.WithSyncer(exp)
	if batch {
		processor = sdktrace.WithBatcher(exp, sdktrace.WithBlocking())
	}
	tp := sdktrace.NewTracerProvider(processor)
	defer tp.Shutdown(context.Background())
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	benchTracedConversation(b, tel, func(ctx context.Context) {
		if err := tp.ForceFlush(ctx); err != nil {
			b.Fatal(err)
		}
		exp.Reset()
	})
}

func benchTracingBatch(b *testing.B) { benchTracingOn(b, true) }

func benchTracingSync(b *testing.B) { benchTracingOn(b, false) }

// benchTracingOff runs the conversation through a Telemetry made without
// providers (what a host that does not configure tracing has).
func benchTracingOff(b *testing.B) {
	tel, err := telemetry.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	benchTracedConversation(b, tel, nil)
}

func benchUntraced(b *testing.B) { benchTracedConversation(b, nil, nil) }

// benchSDKFloor is what the SDK alone costs for the spans of one traced
// run: the 8 spans of figure 7 (a) (names, kinds, attributes and explicit
// timestamps as the telemetry package gives them) started and ended on
// one goroutine into the same processor and exporter as the goal row,
// flushed as often, without actors, taps or recorder. The traced run
// cannot take less CPU than the untraced one plus this. Options and
// attributes are passed in reused slices, as the recorder does.
func benchSDKFloor(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBlocking()))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer(telemetry.ScopeName)
	var (
		internal = trace.WithSpanKind(trace.SpanKindInternal)
		client   = trace.WithSpanKind(trace.SpanKindClient)
		runAttrs = []attribute.KeyValue{attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "tool-loop"), attribute.String("gen_ai.conversation.id", "run-1")}
		chatAttrs = []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "scripted"), attribute.String("gen_ai.request.model", ""),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_calls"})}
		toolAttrs = []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", "noop_a"), attribute.String("gen_ai.tool.call.id", "call_1"),
			attribute.String("polyweave.tool.outcome", "ok")}
		start = make([]trace.SpanStartOption, 3)
		end   = make([]trace.SpanEndOption, 1)
	)
	var at time.Time // one clock reading a run: the recorder reads none
	span := func(parent context.Context, name string, kind trace.SpanStartOption, attrs []attribute.KeyValue) (context.Context, trace.Span) {
		start[0], start[1], start[2] = trace.WithTimestamp(at), kind, trace.WithAttributes(attrs...)
		return tr.Start(parent, name, start...)
	}
	finish := func(s trace.Span) {
		end[0] = trace.WithTimestamp(at)
		s.End(end...)
	}
	flush := func() {
		if err := tp.ForceFlush(context.Background()); err != nil {
			b.Fatal(err)
		}
		exp.Reset()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := range b.N {
		at = time.Now()
		ctx, run := span(context.Background(), "invoke_agent tool-loop", internal, runAttrs)
		for j := range 4 {
			_, s := span(ctx, "chat", client, chatAttrs)
			finish(s)
			if j < 3 {
				_, s = span(ctx, "execute_tool noop_a", internal, toolAttrs)
				finish(s)
			}
		}
		finish(run)
		if i%64 == 63 {
			flush()
		}
	}
	flush()
	b.StopTimer()
	reportRuns(b, b.N, processCPU()-cpu)
}

func figureTracing(c *config) []Row {
	return c.rows([]pair{
		{figure: "7", name: "(a) traced (in-memory exporter) vs untraced", kind: duration, unit: "run",
			ours: benchSide("traced", benchTracingBatch), base: benchSide("untraced", benchUntraced), goal: ratioAtMost(1.15),
			note: "the SDK's batch span processor, as in production"},
		{figure: "7", name: "(a) traced, simple span processor, vs untraced", kind: duration, unit: "run",
			ours: benchSide("traced (simple)", benchTracingSync), base: benchSide("untraced", benchUntraced), goal: info,
			note: "spans exported as they end, on the recorder's goroutine, as tests do"},
		{figure: "7", name: "(a) tracing off (no provider) vs untraced", kind: duration, unit: "run",
			ours: benchSide("tracing off", benchTracingOff), base: benchSide("untraced", benchUntraced), goal: info,
			note: "allocations per run must be equal"},
		{figure: "7", name: "(a) traced vs untraced, per CPU second", kind: throughput, unit: "runs per CPU",
			ours: metricSide("traced", "runs/cpu-s", benchTracingBatch), base: metricSide("untraced", "runs/cpu-s", benchUntraced), goal: info,
			note: "runs per second of the process's CPU time (the run, the recorder, the SDK, GC): what tracing costs, whatever share of a busy machine the process gets"},
		{figure: "7", name: "(a) the SDK alone (8 spans) vs untraced, per CPU second", kind: throughput, unit: "runs per CPU",
			ours: metricSide("SDK alone", "runs/cpu-s", benchSDKFloor), base: metricSide("untraced", "runs/cpu-s", benchUntraced), goal: info,
			note: "the spans of a traced run started and ended by the SDK alone, same processor and exporter: the floor of what tracing adds"},
	})
}
