package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// openSpans is a span processor that keeps the spans started and not
// ended: a span left open is invisible to an exporter.
type openSpans struct {
	mu   sync.Mutex
	open map[trace.SpanID]string // → span name
}

func (p *openSpans) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil {
		p.open = map[trace.SpanID]string{}
	}
	p.open[s.SpanContext().SpanID()] = s.Name()
}

func (p *openSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, s.SpanContext().SpanID())
}

func (p *openSpans) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for _, n := range p.open {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (p *openSpans) Shutdown(context.Context) error   { return nil }
func (p *openSpans) ForceFlush(context.Context) error { return nil }

// approvalTrace is a Telemetry recording into exp, with open keeping
// the spans not ended.
func approvalTrace(t *testing.T) (tel *telemetry.Telemetry, exp *tracetest.InMemoryExporter, open *openSpans) {
	tel, exp, open, _ = approvalTelemetry(t)
	return tel, exp, open
}

// approvalTelemetry is approvalTrace with metrics, read by reader.
func approvalTelemetry(t *testing.T) (tel *telemetry.Telemetry, exp *tracetest.InMemoryExporter, open *openSpans, reader *sdkmetric.ManualReader) {
	t.Helper()
	exp, open, reader = tracetest.NewInMemoryExporter(), &openSpans{}, sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(open), sdktrace.WithSyncer(exp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("telemetry shutdown: %v", err)
		}
	})
	return tel, exp, open, reader
}

// approvalAgent is an agent whose model asks for an echo and an
// irreversible launch, then answers "Done."; the launch waits for
// approval. echoes, when set, counts the echo tool's runs.
func approvalAgent(t *testing.T, rt *actors.Runtime, tel *telemetry.Telemetry, approval *tools.ApprovalOptions, store *memstore.Store,
	echoes *atomic.Int64) *agent.Agent {
	t.Helper()
	call := func(id, name, args string) scripted.ToolCall {
		return scripted.ToolCall{ID: id, Name: name, Arguments: args}
	}
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Echo and launch.", ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`), call("c2", "launch", `{"target":"moon"}`)}},
		{Text: "Done."},
	}}, nil)
	type text struct {
		Text string `json:"text"`
	}
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Description: "Echo the text.", Capabilities: []string{"read"}},
		func(_ context.Context, in text) (string, error) {
			if echoes != nil {
				echoes.Add(1)
			}
			return in.Text, nil
		})
	type target struct {
		Target string `json:"target"`
	}
	launch := tools.MustNewTyped(tools.Definition{Name: "launch", Capabilities: []string{"execute"}, Irreversible: true},
		func(_ context.Context, in target) (string, error) { return in.Target, nil })
	opts := &agent.Options{Name: "launcher", Tools: []*tools.Tool{echo, launch}, Approval: approval, Telemetry: tel}
	if store != nil {
		opts.Store = store
	}
	a, err := agent.New(rt, tel.Model(model.Spec("model"), "scripted"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(context.Background()); err != nil {
			t.Errorf("close agent: %v", err)
		}
	})
	return a
}

var launchAsk = []models.Message{models.UserMessage("Echo, then launch.")}

// spansNamed returns the ended spans named name.
func spansNamed(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestAgent_ApprovalDeadlinePassedBeforeResume: without a Store, a
// deadline that passes before Resume lets the loop finish the
// conversation, which ends its run span; the approval frames the Resume
// then sends on that stream start no run (one would never end).
func TestAgent_ApprovalDeadlinePassedBeforeResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		tel, exp, open := approvalTrace(t)
		a := approvalAgent(t, rt, tel, &tools.ApprovalOptions{Deadline: time.Hour}, nil, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
		defer cancel()
		if _, err := a.Run(ctx, "s1", launchAsk); err == nil {
			t.Fatal("Run did not wait for approval")
		}
		time.Sleep(time.Hour + time.Minute) // the fake clock passes the deadline
		synctest.Wait()                     // and the loop has finished the conversation
		resumeDone(ctx, t, a)
		allEnded(ctx, t, tel, open)
		if runs := spansNamed(exp, "invoke_agent launcher"); len(runs) != 1 {
			t.Fatalf("%d run spans, want 1", len(runs))
		}
	})
}

// TestAgent_ResumeTraced: a Resume, on the waiting stream without a
// Store or as a new request to a session loop with one, is traced to its
// end: every span ends, and the approved launch is a tool span of a run.
func TestAgent_ResumeTraced(t *testing.T) {
	for _, durable := range []bool{false, true} {
		name := "shared loop"
		if durable {
			name = "store"
		}
		t.Run(name, func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			tel, exp, open := approvalTrace(t)
			var store *memstore.Store
			if durable {
				store = memstore.New(nil)
				defer store.Close()
			}
			a := approvalAgent(t, rt, tel, &tools.ApprovalOptions{}, store, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := a.Run(ctx, "s1", launchAsk); err == nil {
				t.Fatal("Run did not wait for approval")
			}
			resumeDone(ctx, t, a)
			allEnded(ctx, t, tel, open)
			// The launch approved and run is a tool span of a run (with a
			// Store, the waiting attempt's loop is stopped: its held call
			// ends there as stopped, and the Resume is a run of its own).
			var launch tracetest.SpanStub
			for _, s := range spansNamed(exp, "execute_tool launch") {
				if slices.Contains(s.Attributes, attribute.String("polyweave.tool.outcome", "ok")) {
					launch = s
				}
			}
			if !launch.SpanContext.IsValid() {
				t.Fatal("no span of the approved launch")
			}
			runs := spansNamed(exp, "invoke_agent launcher")
			i := slices.IndexFunc(runs, func(r tracetest.SpanStub) bool { return r.SpanContext.SpanID() == launch.Parent.SpanID() })
			if i < 0 || runs[i].EndTime.Before(launch.EndTime) || runs[i].Status.Code != codes.Unset {
				t.Fatalf("launch span not within a run that ended well: %+v", runs)
			}
		})
	}
}

// metricsTelemetry is a Telemetry with a meter provider only, read by
// the returned reader.
func metricsTelemetry(t *testing.T) (*telemetry.Telemetry, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	tel, err := telemetry.New(&telemetry.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel, reader
}

// waitingAgent starts an approval agent on tel in rt (with store and
// echoes, as approvalAgent makes it) and runs its session s1 until it
// waits for approval. The context returned bounds the test: 30 s.
func waitingAgent(t *testing.T, rt *actors.Runtime, tel *telemetry.Telemetry, store *memstore.Store, echoes *atomic.Int64) (*agent.Agent, context.Context) {
	t.Helper()
	a := approvalAgent(t, rt, tel, &tools.ApprovalOptions{}, store, echoes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	runToWait(ctx, t, a)
	return a, ctx
}

// resumeDone resumes session s1 of a approving call c2; the answer must
// be "Done.".
func resumeDone(ctx context.Context, t *testing.T, a *agent.Agent) {
	t.Helper()
	ans, err := a.Resume(ctx, "s1", launchAsk, agent.Approve("c2"))
	if err != nil || ans.Text != "Done." {
		t.Fatalf("resume: %v, %q", err, ans.Text)
	}
}

// flush waits until tel has recorded everything so far.
func flush(ctx context.Context, t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// allEnded flushes tel and checks that no span is left open.
func allEnded(ctx context.Context, t *testing.T, tel *telemetry.Telemetry, open *openSpans) {
	t.Helper()
	flush(ctx, t, tel)
	if names := open.names(); len(names) != 0 {
		t.Fatalf("spans left open: %v", names)
	}
}

// runToWait runs session s1 of a until it waits for approval.
func runToWait(ctx context.Context, t *testing.T, a *agent.Agent) {
	t.Helper()
	var w *agent.WaitingError
	if _, err := a.Run(ctx, "s1", launchAsk); !errors.As(err, &w) {
		t.Fatalf("Run: %v, want a wait for approval", err)
	}
}

// TestAgent_DurableWaitIsNotAFailure: with a Store, the loop of a run
// that waits for approval is stopped (the session is in the store); its
// run span ends without error, marked awaiting approval, and so does the
// held call's span, which the tool-call metrics do not count. The
// resumed run has the call's real outcome, and the call that ran before
// the wait does not run again: its span there is marked reused.
func TestAgent_DurableWaitIsNotAFailure(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	tel, exp, open, reader := approvalTelemetry(t)
	store := memstore.New(nil)
	defer store.Close()
	var echoes atomic.Int64
	a, ctx := waitingAgent(t, rt, tel, store, &echoes)
	flush(ctx, t, tel)
	runs := spansNamed(exp, "invoke_agent launcher")
	if len(runs) != 1 {
		t.Fatalf("%d run spans, want 1", len(runs))
	}
	waited := runs[0]
	if waited.Status.Code != codes.Unset || !slices.Contains(waited.Attributes, attribute.String("polyweave.agent.outcome", "awaiting_approval")) ||
		attrs(waited)["error.type"] != "" {
		t.Fatalf("waiting run span: status %+v, attributes %v", waited.Status, waited.Attributes)
	}
	held := spansNamed(exp, "execute_tool launch")
	if len(held) != 1 || held[0].Status.Code != codes.Unset || attrs(held[0])["polyweave.tool.outcome"] != "awaiting_approval" ||
		attrs(held[0])["error.type"] != "" {
		t.Fatalf("held call spans %+v", held)
	}
	if got := toolDurations(t, reader); fmt.Sprint(got) != fmt.Sprint(map[string]uint64{"echo/ok/": 1}) {
		t.Fatalf("tool-call durations while waiting %v, want only the echo", got)
	}

	resumeDone(ctx, t, a)
	if n := echoes.Load(); n != 1 {
		t.Fatalf("echo ran %d times, want once", n)
	}
	allEnded(ctx, t, tel, open)
	var resumed tracetest.SpanStub
	for _, r := range spansNamed(exp, "invoke_agent launcher") {
		if r.SpanContext.SpanID() != waited.SpanContext.SpanID() {
			resumed = r
		}
	}
	if resumed.Status.Code != codes.Unset || attrs(resumed)["polyweave.agent.outcome"] != "" {
		t.Fatalf("resumed run span: status %+v, attributes %v", resumed.Status, resumed.Attributes)
	}
	var outcomes []string
	for _, s := range spansNamed(exp, "execute_tool launch") {
		if s.Parent.SpanID() == resumed.SpanContext.SpanID() {
			outcomes = append(outcomes, attrs(s)["polyweave.tool.outcome"])
		}
	}
	if !slices.Equal(outcomes, []string{"ok"}) {
		t.Fatalf("launch outcomes in the resumed run %v, want [ok]", outcomes)
	}
	// The echo that ran before the wait is answered from the store in the
	// resumed run: its span says so, and its duration is counted once.
	for _, s := range spansNamed(exp, "execute_tool echo") {
		if reused := attrs(s)["polyweave.tool.reused"] == "true"; reused != (s.Parent.SpanID() == resumed.SpanContext.SpanID()) {
			t.Fatalf("echo span of run %v: attributes %v", s.Parent.SpanID(), s.Attributes)
		}
	}
	if got := toolDurations(t, reader); fmt.Sprint(got) != fmt.Sprint(map[string]uint64{"echo/ok/": 1, "launch/ok/": 1}) {
		t.Fatalf("tool-call durations %v, want each call once, ok", got)
	}
}

// toolDurations counts the tool-call durations recorded, by
// "tool/outcome/error.type".
func toolDurations(t *testing.T, reader *sdkmetric.ManualReader) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != telemetry.MetricOperationDuration || !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				if op, _ := dp.Attributes.Value("gen_ai.operation.name"); op.AsString() == "execute_tool" {
					counts[key(dp.Attributes, "gen_ai.tool.name", "polyweave.tool.outcome", "error.type")] += dp.Count
				}
			}
		}
	}
	return counts
}

// TestMetrics_DurableWaitCountsNoError: with metrics only, the held call
// answered "stopped" when a durable agent stops the waiting session's
// loop is no failed tool call; approved after Resume, it counts once, ok,
// and the call the resumed session answers from the store is not counted
// again.
func TestMetrics_DurableWaitCountsNoError(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	tel, reader := metricsTelemetry(t)
	store := memstore.New(nil)
	defer store.Close()
	a, ctx := waitingAgent(t, rt, tel, store, nil)
	flush(ctx, t, tel)
	if got := toolDurations(t, reader); fmt.Sprint(got) != fmt.Sprint(map[string]uint64{"echo/ok/": 1}) {
		t.Fatalf("tool-call durations while waiting %v, want only the echo", got)
	}
	if _, err := a.Resume(ctx, "s1", launchAsk, agent.Approve("c2")); err != nil {
		t.Fatal(err)
	}
	flush(ctx, t, tel)
	if got := toolDurations(t, reader); fmt.Sprint(got) != fmt.Sprint(map[string]uint64{"echo/ok/": 1, "launch/ok/": 1}) {
		t.Fatalf("tool-call durations %v, want each call once, ok", got)
	}
}

// TestAgent_DroppedWaitIsAFailure: without a Store, a session waiting
// for approval waits only in the agent's loop: Close drops it, and
// nothing will resume it. Its run span ends failed, not awaiting
// approval, and its held call ends "stopped", counted as such.
func TestAgent_DroppedWaitIsAFailure(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	tel, exp, open, reader := approvalTelemetry(t)
	a, ctx := waitingAgent(t, rt, tel, nil, nil)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	allEnded(ctx, t, tel, open)
	runs := spansNamed(exp, "invoke_agent launcher")
	if len(runs) != 1 || runs[0].Status.Code != codes.Error || attrs(runs[0])["polyweave.agent.outcome"] != "" {
		t.Fatalf("dropped run spans %+v, want one failed, not awaiting approval", runs)
	}
	held := spansNamed(exp, "execute_tool launch")
	if len(held) != 1 || held[0].Status.Code != codes.Error || attrs(held[0])["error.type"] != string(tools.FailureStopped) {
		t.Fatalf("held call spans %+v, want one stopped", held)
	}
	want := map[string]uint64{"echo/ok/": 1, "launch/error/stopped": 1}
	if got := toolDurations(t, reader); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tool-call durations %v, want %v", got, want)
	}
}

// TestMetrics_DroppedWaitCountsStopped: with metrics only, the held call
// of a session Close drops without a Store counts as stopped.
func TestMetrics_DroppedWaitCountsStopped(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	tel, reader := metricsTelemetry(t)
	a, ctx := waitingAgent(t, rt, tel, nil, nil)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	flush(ctx, t, tel)
	want := map[string]uint64{"echo/ok/": 1, "launch/error/stopped": 1}
	if got := toolDurations(t, reader); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tool-call durations %v, want %v", got, want)
	}
}
