package main

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/telemetry"
)

// Figure 7 with tracing: the conversation of figure 7 (a), its loop and
// model adapter tapped by the telemetry package with spans recorded by
// the SDK into its in-memory exporter (8 spans a run: the run, 4 model
// requests, 3 tool calls), against the same conversation untraced, in
// the same run. A second row checks that a Telemetry with tracing off
// (no provider) adds no allocation per run; a third compares the CPU time
// per run, which a busy machine disturbs less than the time per run.

// benchTracedConversation measures runs of the figure 7 (a) conversation
// under tel (nil: untapped). reset, when set, is called every 64 runs
// (to drop the spans an in-memory exporter holds).
func benchTracedConversation(b *testing.B, tel *telemetry.Telemetry, reset func()) {
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
		if reset != nil && i%64 == 63 {
			tel.Flush(ctx)
			reset()
		}
	}
	if tel != nil {
		tel.Flush(ctx) // the spans not recorded yet are part of the cost
	}
	b.StopTimer()
	reportRuns(b, b.N, processCPU()-cpu)
}

// benchTracingOn runs the conversation with spans exported, as they end,
// to the SDK's in-memory exporter.
func benchTracingOn(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	benchTracedConversation(b, tel, exp.Reset)
}

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

func figureTracing(c *config) []Row {
	return c.rows([]pair{
		{figure: "7", name: "(a) traced (in-memory exporter) vs untraced", kind: duration, unit: "run",
			ours: benchSide("traced", benchTracingOn), base: benchSide("untraced", benchUntraced), goal: ratioAtMost(1.15)},
		{figure: "7", name: "(a) tracing off (no provider) vs untraced", kind: duration, unit: "run",
			ours: benchSide("tracing off", benchTracingOff), base: benchSide("untraced", benchUntraced), goal: info,
			note: "allocations per run must be equal"},
		{figure: "7", name: "(a) traced vs untraced, per CPU second", kind: throughput, unit: "runs per CPU",
			ours: metricSide("traced", "runs/cpu-s", benchTracingOn), base: metricSide("untraced", "runs/cpu-s", benchUntraced), goal: info,
			note: "runs per second of the process's CPU time (the run, the recorder, the SDK, GC): what tracing costs, whatever share of a busy machine the process gets"},
	})
}
