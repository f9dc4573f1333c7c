package telemetry_test

import (
	"context"
	"fmt"
	"sort"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// An agent traced into the SDK's in-memory exporter: its run is one
// trace, a chat span per model request and an execute_tool span per call
// under the run.
func Example() {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	defer tel.Shutdown(ctx)
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{OnSupervision: tel.Supervision})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	type in struct {
		A int `json:"a"`
	}
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds one"}, func(_ context.Context, in in) (int, error) { return in.A + 1, nil })
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":1}`}}},
		{Text: "2"},
	}}, nil)
	a, err := agent.New(rt, tel.Model(model.Spec("model"), "scripted"), &agent.Options{Name: "adder", Tools: []*tools.Tool{add}, Telemetry: tel})
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx)
	if _, err := a.Run(ctx, "session-1", []models.Message{models.UserMessage("1 + 1?")}); err != nil {
		panic(err)
	}
	if err := tel.Flush(ctx); err != nil { // the spans are built off the run
		panic(err)
	}

	spans := exp.GetSpans()
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].StartTime.Before(spans[j].StartTime) })
	depth := map[string]int{}
	for _, s := range spans {
		d := 0
		if s.Parent.IsValid() {
			d = depth[s.Parent.SpanID().String()] + 1
		}
		depth[s.SpanContext.SpanID().String()] = d
		fmt.Println(strings.Repeat("  ", d) + s.Name)
	}
	// Output:
	// invoke_agent adder
	//   chat
	//   execute_tool add
	//   chat
}
