package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/telemetry"
)

// traceFlag is the value of -trace: the file the run's spans go to.
type traceFlag struct{ file string }

func (f *traceFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "trace", "",
		"write the run's OpenTelemetry spans to `file`, one JSON object a line (the\n"+
			"SDK's stdout exporter): invoke_agent per run, chat per model request,\n"+
			"execute_tool per tool call, supervision decisions as span events; read\n"+
			"the tree with jq '{name: .Name, parent: .Parent.SpanID, id: .SpanContext.SpanID}'")
}

// tracing is what -trace sets up; a nil *tracing traces nothing.
type tracing struct {
	tel  *telemetry.Telemetry
	tp   *sdktrace.TracerProvider
	file *os.File
}

// startTracing opens -trace's file and a tracer provider writing to it,
// or returns nil without -trace.
func startTracing(f traceFlag) (*tracing, error) {
	if f.file == "" {
		return nil, nil
	}
	file, err := os.Create(f.file)
	if err != nil {
		return nil, fmt.Errorf("-trace: %w", err)
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(file))
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("-trace: %w", err)
	}
	// Spans are written as they end: the recorder builds them off the
	// actors' turns, so the file's writes do not slow the run.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		file.Close()
		return nil, err
	}
	return &tracing{tel: tel, tp: tp, file: file}, nil
}

// agent taps an agent's model adapter (provider is gen_ai.provider.name)
// and sets its options to trace its loop.
func (t *tracing) agent(model actors.Spec, provider string, opts *agent.Options) actors.Spec {
	if t == nil {
		return model
	}
	opts.Telemetry = t.tel
	return t.tel.Model(model, provider)
}

// supervision adds a decision to the open runs' spans.
func (t *tracing) supervision(ev supervisor.Event) {
	if t != nil {
		t.tel.Supervision(ev)
	}
}

// close writes what is left and closes the file; call it once the
// runtime is closed.
func (t *tracing) close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := errors.Join(t.tel.Shutdown(ctx), t.tp.Shutdown(ctx), t.file.Close())
	if err != nil {
		return fmt.Errorf("-trace: %w", err)
	}
	return nil
}

// providerName is gen_ai.provider.name of the flags' model.
func providerName(cfg config) string {
	switch {
	case cfg.provider != "":
		return cfg.provider
	case cfg.baseURL != "":
		return "openai"
	}
	return "scripted"
}
