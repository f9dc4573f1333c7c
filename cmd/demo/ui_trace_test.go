package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

type failIn struct {
	X int `json:"x"`
}

// With -ui and -trace both, an agent's breaker changes reach the live
// view's feed and figures, and the telemetry's breaker gauge: the live
// view's hook does not silence the telemetry's (agent.New gives
// Telemetry.BreakerChanged only to an agent without a hook of its own).
func TestUI_BreakerChangesWithTrace(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cfg config
	cfg.ui.addr = "127.0.0.1:0"
	trc, err := startTracing(traceFlag{file: filepath.Join(t.TempDir(), "trace.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	// -trace's telemetry, measuring too, to see its breaker gauge.
	if err := trc.tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	if trc.tel, err = telemetry.New(&telemetry.Options{TracerProvider: trc.tp,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}); err != nil {
		t.Fatal(err)
	}
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(&bytes.Buffer{}, nil, time.Now())
	ui, err := startUI(cfg, rt, tr)
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{cfg: cfg, tr: tr, rt: rt, ui: ui, trace: trc}
	defer func() {
		d.close(ctx)
		ui.close()
		if err := rt.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := trc.close(ctx); err != nil {
			t.Error(err)
		}
	}()

	failing := tools.MustNewTyped(tools.Definition{Name: "flaky", Description: "always fails"},
		func(context.Context, failIn) (failIn, error) { return failIn{}, errors.New("down") })
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "flaky", Arguments: `{"x":1}`}}},
		{Text: "it is down"},
	}}, nil).Spec("model")
	a, err := d.newAgent(model, &agent.Options{Name: "agent", Tools: []*tools.Tool{failing},
		Breaker: tools.BreakerOptions{Failures: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, "s1", []models.Message{models.UserMessage("try it")}); err != nil {
		t.Fatal(err)
	}
	snap := ui.insp.Snapshot("")
	opened := false
	for _, it := range snap.Feed {
		opened = opened || it.Kind == "breaker" && strings.Contains(it.Text, "flaky open")
	}
	var breaker string
	for _, tf := range snap.Tools {
		if tf.Name == "flaky" {
			breaker = tf.Breaker
		}
	}
	if !opened || breaker != "open" {
		t.Fatalf("feed %+v, flaky's breaker %q: want it opened, in the feed and the figures", snap.Feed, breaker)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	gauge := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == telemetry.MetricBreakerState {
				for _, dp := range g.DataPoints {
					name, _ := dp.Attributes.Value("gen_ai.tool.name")
					gauge[name.AsString()] = dp.Value
				}
			}
		}
	}
	if gauge["flaky"] != int64(tools.BreakerOpen) {
		t.Fatalf("breaker gauge %v: want flaky open (%d)", gauge, tools.BreakerOpen)
	}
}
