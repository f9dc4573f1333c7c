package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// crashOn makes a model adapter's actor panic when a request on stream
// ends: a supervised failure in the middle of a run.
func crashOn(spec actors.Spec, stream string) actors.Spec {
	newLogic := spec.New
	spec.New = func() actors.Logic { return &crashing{inner: newLogic(), stream: stream} }
	return spec
}

type crashing struct {
	inner  actors.Logic
	stream string
	hold   func(*messages.Frame) // when set, sees each frame first
}

func (m *crashing) Receive(c actors.Context, msg any) {
	f, ok := msg.(*messages.Frame)
	if ok && f.GetType() == messages.FrameType_END && f.GetStreamId() == m.stream {
		panic("injected model crash")
	}
	if ok && m.hold != nil {
		m.hold(f)
	}
	m.inner.Receive(c, msg)
}

func (m *crashing) OnFailure(c actors.Context, err error) {
	if h, ok := m.inner.(actors.FailureHandler); ok {
		h.OnFailure(c, err)
	}
}

// scenario runs, through one traced agent, "s1": two tool rounds whose
// second tool panics (its breaker, with a threshold of 1, opens), then
// "s2", whose model request crashes the adapter actor (restarted by its
// supervisor).
func scenario(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":1}`}}, Usage: &scripted.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		{ToolCalls: []scripted.ToolCall{{ID: "call_2", Name: "boom", Arguments: `{"a":2}`}}},
		{Text: "done"},
	}}, nil)
	type in struct {
		A int `json:"a"`
	}
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds"}, func(_ context.Context, in in) (int, error) { return in.A + 1, nil })
	boom := tools.MustNewTyped(tools.Definition{Name: "boom", Description: "Panics"}, func(_ context.Context, in in) (int, error) { panic("injected") })
	// The panicked tool's call is answered before its supervisor decides
	// about the tool actor: the model's last request of s1 waits for the
	// decision, so that it falls within the run (as a slower model would).
	toolDecided := make(chan struct{})
	var decidedOnce sync.Once
	ends := 0
	spec := crashOn(model.Spec("model"), "s2")
	inner := spec.New
	spec.New = func() actors.Logic {
		l := inner().(*crashing)
		l.hold = func(f *messages.Frame) {
			if f.GetType() != messages.FrameType_END || f.GetStreamId() != "s1" {
				return
			}
			if ends++; ends == 3 {
				select {
				case <-toolDecided:
				case <-time.After(20 * time.Second):
					t.Error("no supervision decision about the panicked tool")
				}
			}
		}
		return l
	}
	onSupervision := func(ev supervisor.Event) {
		tel.Supervision(ev)
		if strings.HasSuffix(ev.Child, "tool-boom") {
			decidedOnce.Do(func() { close(toolDecided) })
		}
	}
	loop, err := tools.NewLoop(tel.Model(spec, "scripted"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{
		Name:    "agent",
		Tools:   []*tools.Tool{add, boom},
		Breaker: tools.BreakerOptions{Failures: 1, OnChange: tel.BreakerChanged},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("shut telemetry down: %v", err)
		}
	})
	rt, err := actors.NewRuntime(&actors.RuntimeOptions{OnSupervision: onSupervision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	conn, err := rt.Start(tel.Agent(loop))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, stream := range []string{"s1", "s2"} {
		if err := conn.SendAll(messages.RawParam(stream, "messages", json.RawMessage(`[{"role":"user","content":"go"}]`)), messages.End(stream)); err != nil {
			t.Fatal(err)
		}
		frames, err := conn.RecvStream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		failed := false
		for _, f := range frames {
			failed = failed || f.GetType() == messages.FrameType_ERROR
		}
		if failed != (stream == "s2") {
			t.Fatalf("stream %s: ERROR seen %v (frames %v)", stream, failed, frames)
		}
	}
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTrace_RunIsOneTrace: two tool rounds, the second tool panics; the
// run is one trace: invoke_agent at the root, three chat spans and two
// execute_tool spans under it, the panicked call with error.type panic.
// The second run, whose model adapter crashes, is a trace of its own whose
// run span holds the supervisor's restart as a span event.
func TestTrace_RunIsOneTrace(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	scenario(t, tel)

	spans := exp.GetSpans()
	roots := map[string]tracetest.SpanStub{} // conversation id → run span
	for _, s := range spans {
		if s.Name == "invoke_agent agent" {
			roots[attrs(s)["gen_ai.conversation.id"]] = s
		}
	}
	root, crashed := roots["s1"], roots["s2"]
	if !root.SpanContext.IsValid() || !crashed.SpanContext.IsValid() {
		t.Fatalf("run spans %v in %d spans", roots, len(spans))
	}
	if root.SpanContext.TraceID() == crashed.SpanContext.TraceID() {
		t.Fatal("two runs share a trace")
	}
	count := map[string]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			continue
		}
		if s.Name != root.Name && s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("span %s is not a child of the run", s.Name)
		}
		count[s.Name]++
		a := attrs(s)
		switch s.Name {
		case "execute_tool boom":
			if a["error.type"] != "panic" || a["polyweave.tool.outcome"] != "error" || a["gen_ai.tool.call.id"] != "call_2" {
				t.Errorf("panicked call's span attributes %v", a)
			}
		case "execute_tool add":
			if a["polyweave.tool.outcome"] != "ok" || a["gen_ai.tool.name"] != "add" {
				t.Errorf("add span attributes %v", a)
			}
		case "chat":
			if a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "scripted" || a["gen_ai.response.finish_reasons"] == "" {
				t.Errorf("chat span attributes %v", a)
			}
		}
	}
	if ev := supervisionEvent(root); ev["polyweave.stage"] != "tool-boom" || ev["polyweave.supervision.directive"] != "restart" {
		t.Errorf("first run's supervision event %v: want the panicked tool's restart", ev)
	}
	if count["chat"] != 3 || count["execute_tool add"] != 1 || count["execute_tool boom"] != 1 || count["invoke_agent agent"] != 1 {
		t.Fatalf("spans of the first run %v", count)
	}
	usage := 0
	for _, s := range spans {
		if s.Name == "chat" && attrs(s)["gen_ai.usage.input_tokens"] == "10" && attrs(s)["gen_ai.usage.output_tokens"] == "5" {
			usage++
		}
	}
	if usage != 1 {
		t.Errorf("%d chat spans with the first turn's usage, want 1", usage)
	}

	// The crashed run: an error, the restart as an event, a failed chat.
	if crashed.Status.Code.String() != "Error" {
		t.Errorf("crashed run's status %v", crashed.Status)
	}
	if restart := supervisionEvent(crashed); restart["polyweave.supervision.directive"] != "restart" || restart["polyweave.stage"] != "model" || restart["error.type"] != "panic" {
		t.Errorf("crashed run's supervision event %v (events %v)", restart, crashed.Events)
	}
	chats := 0
	for _, s := range spans {
		if s.SpanContext.TraceID() == crashed.SpanContext.TraceID() && s.Name == "chat" {
			chats++
			if attrs(s)["error.type"] != "model_failed" || s.Parent.SpanID() != crashed.SpanContext.SpanID() {
				t.Errorf("crashed chat span %v, parent %v", attrs(s), s.Parent.SpanID())
			}
		}
	}
	if chats != 1 {
		t.Errorf("%d chat spans in the crashed run, want 1", chats)
	}
	for _, s := range spans {
		if !s.EndTime.After(s.StartTime) && !s.EndTime.Equal(s.StartTime) {
			t.Errorf("span %s not ended", s.Name)
		}
	}
}

// supervisionEvent returns the attributes of the span's supervision
// event (nil when it has none).
func supervisionEvent(s tracetest.SpanStub) map[string]string {
	var m map[string]string
	for _, ev := range s.Events {
		if ev.Name == "supervision" {
			m = map[string]string{}
			for _, kv := range ev.Attributes {
				m[string(kv.Key)] = kv.Value.String()
			}
		}
	}
	return m
}

func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, a := range s.Attributes {
		m[string(a.Key)] = a.Value.String()
	}
	return m
}

// TestMetrics_RecordedInstruments reads what the scenario recorded, with
// the SDK's manual reader: model and tool durations by operation and
// outcome, tokens by type, the restart by stage and cause, the breaker
// that opened.
func TestMetrics_RecordedInstruments(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	tel, reader := metricsTelemetry(t)
	if tel.Tracing() {
		t.Fatal("tracing on without a tracer provider")
	}
	scenario(t, tel)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}

	// Durations: 4 model requests (3 + the crashed one), 2 tool calls.
	dur := aggregation[metricdata.Histogram[float64]](t, got, telemetry.MetricOperationDuration)
	counts := map[string]uint64{}
	for _, dp := range dur.DataPoints {
		counts[key(dp.Attributes, "gen_ai.operation.name", "gen_ai.tool.name", "polyweave.tool.outcome", "error.type")] += dp.Count
	}
	want := map[string]uint64{"chat///": 4, "execute_tool/add/ok/": 1, "execute_tool/boom/error/panic": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("operation durations %v, want %v", counts, want)
	}

	tok := aggregation[metricdata.Histogram[int64]](t, got, telemetry.MetricTokenUsage)
	sums := map[string]int64{}
	for _, dp := range tok.DataPoints {
		sums[key(dp.Attributes, "gen_ai.token.type")] += dp.Sum
	}
	if sums["input"] != 10 || sums["output"] != 5 {
		t.Errorf("token sums %v, want input 10 and output 5", sums)
	}

	sup := aggregation[metricdata.Sum[int64]](t, got, telemetry.MetricSupervision)
	decisions := map[string]int64{}
	for _, dp := range sup.DataPoints {
		decisions[key(dp.Attributes, "polyweave.stage", "error.type", "polyweave.supervision.directive")] += dp.Value
	}
	if fmt.Sprint(decisions) != fmt.Sprint(map[string]int64{"model/panic/restart": 1, "tool-boom/panic/restart": 1}) {
		t.Errorf("supervision decisions %v", decisions)
	}

	br := aggregation[metricdata.Gauge[int64]](t, got, telemetry.MetricBreakerState)
	states := map[string]int64{}
	for _, dp := range br.DataPoints {
		states[key(dp.Attributes, "gen_ai.tool.name")] = dp.Value
	}
	if fmt.Sprint(states) != fmt.Sprint(map[string]int64{"boom": int64(tools.BreakerOpen)}) {
		t.Errorf("breaker states %v", states)
	}
}

// aggregation returns the data of metric name in got, stopping the test
// when it is not an A.
func aggregation[A metricdata.Aggregation](t *testing.T, got map[string]metricdata.Aggregation, name string) A {
	t.Helper()
	a, ok := got[name].(A)
	if !ok {
		t.Fatalf("%s: %T", name, got[name])
	}
	return a
}

// key joins the values of the named attributes with "/".
func key(set attribute.Set, names ...string) string {
	var parts []string
	for _, n := range names {
		v, _ := set.Value(attribute.Key(n))
		parts = append(parts, v.String())
	}
	return strings.Join(parts, "/")
}
