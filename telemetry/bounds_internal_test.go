package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/resilience"
	"github.com/polyweave/polyweave-go/tools"
)

// failedResult is the error result of call id of tool name whose payload
// is payload, of kind.
func failedResult(stream, id, name string, kind tools.FailureKind, payload string) *messages.Frame {
	f := messages.RawToolResult(stream, id, name, []byte(payload))
	f.Meta = &messages.Metadata{IsError: true, FailureKind: string(kind)}
	return f
}

// TestTraced_StatusDescriptionsBounded: a failed call's span has the
// call's error message as its status, not the whole result object (a
// tool's own result, a command's output, say, which may hold anything),
// and a long error message, or a run's long ERROR text, is clipped to
// maxDescription bytes (valid UTF-8 still): nothing the tools or the
// model write makes a span grow without bound.
func TestTraced_StatusDescriptionsBounded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := boundsTelemetry(t, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	huge := strings.Repeat("é", 1<<19) // 1 MiB
	own, _ := json.Marshal(map[string]any{"success": false, "error": "exit status 1", "stdout": "TOKEN=" + huge})
	long, _ := json.Marshal(map[string]any{"success": false, "error": huge})

	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	agent.out(messages.ToolCall("s1", "c1", "run_command", nil))
	agent.out(failedResult("s1", "c1", "run_command", tools.FailureHandler, string(own)))
	agent.out(messages.ToolCall("s1", "c2", "run_command", nil))
	agent.out(failedResult("s1", "c2", "run_command", tools.FailureHandler, string(long)))
	agent.out(messages.Error("s1", huge))
	agent.out(messages.End("s1"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	got := map[string]string{}
	for _, s := range exp.GetSpans() {
		name := s.Name
		if id := spanAttr(s, "gen_ai.tool.call.id"); id != "" {
			name = id
		}
		got[name] = s.Status.Description
	}
	if d := got["c1"]; d != "exit status 1" {
		t.Errorf("status of the call whose result is the tool's own object: %.80q (%d bytes), want its error message", d, len(d))
	}
	for _, name := range []string{"c2", "invoke_agent a"} {
		d, ok := got[name]
		if !ok {
			t.Fatalf("no span %s among %v", name, exp.GetSpans())
		}
		if len(d) > maxDescription || !utf8.ValidString(d) || !strings.HasPrefix(d, "éé") {
			t.Errorf("status of %s: %d bytes (valid UTF-8 %v), want at most %d, the start of the message", name, len(d), utf8.ValidString(d), maxDescription)
		}
	}
}

// toolSeries returns the gen_ai.tool.name values of the execute_tool
// measurements of gen_ai.client.operation.duration.
func toolSeries(t *testing.T, reader *sdkmetric.ManualReader) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	names := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricOperationDuration {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if op, _ := dp.Attributes.Value("gen_ai.operation.name"); op.AsString() == "execute_tool" {
					name, _ := dp.Attributes.Value("gen_ai.tool.name")
					names[name.AsString()] += dp.Count
				}
			}
		}
	}
	return names
}

// TestUnknownTools_BoundedNames: the model names the tools it calls, and
// may name ones that do not exist, any number of them, of any length.
// Those calls (answered unknown_tool) are measured under one
// gen_ai.tool.name, OtherTool, so that a model cannot grow the metric's
// series without bound (the known tools' names are the host's, and few),
// and their spans are named "execute_tool" with the name they were given
// clipped.
func TestUnknownTools_BoundedNames(t *testing.T) {
	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprint("traced=", traced), func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			reader := sdkmetric.NewManualReader()
			opts := Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
			if traced {
				opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			}
			tel := boundsTelemetry(t, opts)
			c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
			agent := &agentObserver{t: tel, name: "a"}
			agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
			agent.out(messages.ToolCall("s1", "known", "add", nil))
			agent.out(messages.RawToolResult("s1", "known", "add", []byte(`2`)))
			const n = 100
			for i := range n {
				id, name := fmt.Sprint("c", i), fmt.Sprint("made_up_", i)
				if i == 0 {
					name = strings.Repeat("x", 1<<20)
				}
				agent.out(messages.ToolCall("s1", id, name, nil))
				agent.out(failedResult("s1", id, name, tools.FailureUnknownTool, `{"success":false,"error":"Unknown tool"}`))
			}
			agent.out(messages.End("s1"))
			if err := tel.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			series := toolSeries(t, reader)
			if len(series) != 2 || series["add"] == 0 || series[OtherTool] != uint64(n) {
				keys := make([]string, 0, len(series))
				for k := range series {
					keys = append(keys, fmt.Sprintf("%.20s", k))
				}
				t.Errorf("execute_tool series by tool name: %d (%v...), want add and %d calls of %s", len(series), keys[:min(len(keys), 5)], n, OtherTool)
			}
			if !traced {
				return
			}
			for _, s := range exp.GetSpans() {
				if spanAttr(s, "gen_ai.tool.call.id") == "known" {
					if s.Name != "execute_tool add" {
						t.Errorf("known tool's span %q", s.Name)
					}
					continue
				}
				if s.Name != "execute_tool" && strings.HasPrefix(s.Name, "execute_tool") {
					t.Errorf("unknown tool's span named %.40q (%d bytes), want execute_tool", s.Name, len(s.Name))
					break
				}
				if name := spanAttr(s, "gen_ai.tool.name"); len(name) > maxDescription {
					t.Errorf("unknown tool's span has a gen_ai.tool.name of %d bytes, want at most %d", len(name), maxDescription)
				}
			}
		})
	}
}

// TestTraced_ModelWrittenIDsAndErrorsBounded: a tool call's id is the
// model's (any length, as the name), and a resilience transport's error
// is the HTTP client's message: the spans and span events that carry
// them clip them to maxDescription bytes.
func TestTraced_ModelWrittenIDsAndErrorsBounded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := boundsTelemetry(t, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	huge := strings.Repeat("i", 1<<20)
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	agent.out(messages.ToolCall("s1", huge, "add", nil))
	agent.out(messages.RawToolResult("s1", huge, "add", []byte(`2`)))
	agent.out(messages.End("s1"))

	failed, _ := json.Marshal(resilience.Event{Kind: "retry", Attempt: 1, Error: huge})
	out := []*messages.Frame{
		messages.Meta("s2", resilience.MetaEvent, failed),
		models.TruncatedCallFrame("s2", huge, "add", 0, 4096),
		messages.End("s2"),
	}
	model := tel.Model(actors.Spec{Name: "model", New: func() actors.Logic { return echoLogic{out: out} }}, "openai").New()
	model.Receive(c, messages.RawParam("s2", models.ParamModel, json.RawMessage(`"m"`)))
	model.Receive(c, messages.End("s2"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want the run, its call and the chat", len(spans))
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if n := len(kv.Value.Emit()); n > maxDescription {
				t.Errorf("span %s: attribute %s of %d bytes, want at most %d", s.Name, kv.Key, n, maxDescription)
			}
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				if n := len(kv.Value.Emit()); n > maxDescription {
					t.Errorf("span %s, event %s: attribute %s of %d bytes, want at most %d", s.Name, ev.Name, kv.Key, n, maxDescription)
				}
			}
		}
	}
}

// TestTraced_TextsValidUTF8: what tools and models write may not be
// UTF-8 (a failed result that is no JSON, an ERROR text quoting a
// provider's raw answer, a failure's message), short or long. The spans
// carry it as valid UTF-8 (the bytes that are not replaced by U+FFFD):
// OTLP's strings must be, and an exporter fails a whole batch of spans
// on one that is not.
func TestTraced_TextsValidUTF8(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := boundsTelemetry(t, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	long := strings.Repeat("\xffa", maxDescription)
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	agent.out(messages.ToolCall("s1", "c\xff1", "run_command", nil))
	agent.out(failedResult("s1", "c\xff1", "run_command", tools.FailureHandler, "exit \xff\xfe"))
	agent.out(messages.ToolCall("s1", "c2", "run_command", nil))
	agent.out(failedResult("s1", "c2", "run_command", tools.FailureHandler, long))
	agent.out(messages.Error("s1", "provider said \xc3"))
	agent.in(c, messages.RawParam("s2", "messages", json.RawMessage(`[]`)))
	agent.failed(c, fmt.Errorf("tool said %q\xff", "x"))

	model := &modelObserver{t: tel, provider: "p"}
	model.in(c, messages.RawParam("s3", "model", json.RawMessage(`"m"`)))
	model.in(c, messages.End("s3"))
	model.out(messages.Error("s3", "502 \xe2\x82"))
	model.out(messages.End("s3"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 2 runs, 2 calls and a chat", len(spans))
	}
	for _, s := range spans {
		if d := s.Status.Description; !utf8.ValidString(d) || len(d) > maxDescription || d == "" {
			t.Errorf("span %s: status %q (%d bytes), want valid UTF-8 of at most %d bytes", s.Name, d, len(d), maxDescription)
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); !utf8.ValidString(v) {
				t.Errorf("span %s: attribute %s %q is not valid UTF-8", s.Name, kv.Key, v)
			}
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				if v := kv.Value.Emit(); !utf8.ValidString(v) {
					t.Errorf("span %s, event %s: attribute %s %q is not valid UTF-8", s.Name, ev.Name, kv.Key, v)
				}
			}
		}
	}
}

// TestMadeUpNames_NoSeriesTaken: calls the loop answers without looking
// their tool up (refused at the iteration limit, cut off by the length
// limit) carry the model's name alone, whatever it made up: any number
// of such names, of any length, take none of the series the duration
// metric keeps for tools, so a tool measured after them still has its
// own; their spans' names are clipped.
func TestMadeUpNames_NoSeriesTaken(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tel := boundsTelemetry(t, Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	for i := range maxToolSeries + 1 {
		id, name, kind := fmt.Sprint("c", i), fmt.Sprint("made_up_", i), tools.FailureLimit
		if i%2 == 1 {
			kind = tools.FailureTruncated
		}
		if i == 0 {
			name = strings.Repeat("x", 1<<20)
		}
		agent.out(messages.ToolCall("s1", id, name, nil))
		agent.out(failedResult("s1", id, name, kind, `{"success":false,"error":"refused"}`))
	}
	agent.out(messages.ToolCall("s1", "known", "add", nil))
	agent.out(messages.RawToolResult("s1", "known", "add", []byte(`2`)))
	agent.out(messages.End("s1"))
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if series := toolSeries(t, reader); len(series) != 2 || series["add"] != 1 || series[OtherTool] != maxToolSeries+1 {
		t.Errorf("execute_tool series: %d, add measured %d times, %s %d; want add once and the %d made-up names as %s",
			len(series), series["add"], OtherTool, series[OtherTool], maxToolSeries+1, OtherTool)
	}
	for _, s := range exp.GetSpans() {
		if len(s.Name) > len("execute_tool ")+maxDescription {
			t.Errorf("span named %.40q... of %d bytes, want at most %d", s.Name, len(s.Name), len("execute_tool ")+maxDescription)
		}
	}
}
