package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// stallingProcessor is a span processor that, while stalling, blocks a
// span's end until the test releases it, as a batch processor configured
// to block does when its exporter stalls.
type stallingProcessor struct {
	stalling atomic.Bool
	stalled  chan chan struct{} // each blocked end sends what releases it
	stop     chan struct{}      // closed by unblock
}

// newStallingProcessor returns a processor that stalls until unblock.
func newStallingProcessor() *stallingProcessor {
	p := &stallingProcessor{stalled: make(chan chan struct{}), stop: make(chan struct{})}
	p.stalling.Store(true)
	return p
}

// stalledTelemetry starts telemetry (opts with TracerProvider set) whose
// spans end in a processor that stalls until told otherwise, then in exp
// when it is not nil. t's cleanup releases the processor, shuts the
// telemetry down unless the test does (ownShutdown), then the tracer
// provider, and checks for leaked goroutines.
func stalledTelemetry(t *testing.T, opts Options, exp *tracetest.InMemoryExporter, ownShutdown bool) (*Telemetry, *stallingProcessor) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	stall := newStallingProcessor()
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(stall)}
	if exp != nil {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(exp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts.TracerProvider = tp
	tel, err := New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	if !ownShutdown {
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	}
	t.Cleanup(stall.unblock) // first, so that a failed test does not hang in Shutdown
	return tel, stall
}

// catchUp checks that tel dropped want events, then lets the processor
// go, release freeing the end it holds, and waits until tel has caught
// up.
func catchUp(ctx context.Context, t *testing.T, tel *Telemetry, stall *stallingProcessor, release chan struct{}, want uint64) {
	t.Helper()
	if d := tel.Dropped(); d != want {
		t.Fatalf("Dropped() = %d, want %d", d, want)
	}
	stall.stalling.Store(false)
	close(release)
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// stallRunEnd runs an agent's request on stream with tel and ends it; the
// run's end stalls in the processor. It returns the agent and what
// releases the end.
func stallRunEnd(stall *stallingProcessor, tel *Telemetry, stream string) (*agentObserver, chan struct{}) {
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	agent.in(c, messages.RawParam(stream, "messages", json.RawMessage(`[]`)))
	agent.out(messages.End(stream))
	return agent, stall.stallNext()
}

// unblock lets every end through, now and later (run at a test's end so
// that a failed one does not hang in Shutdown).
func (p *stallingProcessor) unblock() {
	if p.stalling.Swap(false) {
		close(p.stop)
	}
}

// stallNext waits for a span's end to block and returns what releases it.
func (p *stallingProcessor) stallNext() chan struct{} { return <-p.stalled }

func (p *stallingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *stallingProcessor) OnEnd(sdktrace.ReadOnlySpan) {
	if !p.stalling.Load() {
		return
	}
	release := make(chan struct{})
	select {
	case p.stalled <- release:
	case <-p.stop:
		return
	}
	select {
	case <-release:
	case <-p.stop:
	}
}

func (p *stallingProcessor) Shutdown(context.Context) error   { return nil }
func (p *stallingProcessor) ForceFlush(context.Context) error { return nil }

// warnings is a slog handler that keeps the WARN records.
type warnings struct {
	mu      sync.Mutex
	records []slog.Record
	got     chan struct{} // a token per record
}

func newWarnings() *warnings { return &warnings{got: make(chan struct{}, 16)} }

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	w.mu.Lock()
	w.records = append(w.records, r.Clone())
	w.mu.Unlock()
	w.got <- struct{}{}
	return nil
}

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.records)
}

// droppedMetric reads the counter polyweave.telemetry.dropped (-1 when
// it is not reported).
func droppedMetric(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricDropped {
				sum := m.Data.(metricdata.Sum[int64])
				if len(sum.DataPoints) == 0 {
					return -1
				}
				if !sum.IsMonotonic || len(sum.DataPoints) != 1 {
					t.Fatalf("%s: %+v", MetricDropped, sum)
				}
				return sum.DataPoints[0].Value
			}
		}
	}
	return -1
}

// chatDurations counts the chat measurements of gen_ai.client.operation.duration.
func chatDurations(t *testing.T, reader *sdkmetric.ManualReader) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricOperationDuration {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if op, _ := dp.Attributes.Value("gen_ai.operation.name"); op.AsString() == "chat" {
					n += dp.Count
				}
			}
		}
	}
	return n
}

// queued returns the length and capacity of the recorder's queue.
func queued(tel *Telemetry) (n, capacity int) {
	tel.rec.mu.Lock()
	defer tel.rec.mu.Unlock()
	return len(tel.rec.queue), cap(tel.rec.queue)
}

func spanAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestQueueFull_DropsCountsAndRecovers: while the span processor blocks,
// the queue holds MaxQueued events and no more; the rest are dropped
// without blocking the actor's turn, counted by Dropped and by the
// polyweave.telemetry.dropped counter, and warned about once. A Flush
// made meanwhile returns once the processor is released; the spans that
// were open are then ended, marked incomplete (the chat request without a
// duration measurement), the state kept for them is gone, and a new run
// is recorded in full.
func TestQueueFull_DropsCountsAndRecovers(t *testing.T) {
	const maxQueued = 16
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	warns := newWarnings()
	exp := tracetest.NewInMemoryExporter()
	tel, stall := stalledTelemetry(t, Options{MeterProvider: mp, MaxQueued: maxQueued, Logger: slog.New(warns)}, exp, false)
	ctx := context.Background()

	agentCtx := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	modelCtx := nullContext{self: actors.RefOf(actor.NewPID("test", "agent/model"))}
	agent := &agentObserver{t: tel, name: "a"}
	model := &modelObserver{t: tel, provider: "p"}
	call := func(stream string, i int) {
		id := fmt.Sprintf("call_%d", i)
		agent.out(messages.ToolCall(stream, id, "add", json.RawMessage(`{}`)))
		agent.out(messages.RawToolResult(stream, id, "add", []byte(`2`)))
	}

	// A run starts; its first tool call's span ends in the stalled processor.
	agent.in(agentCtx, messages.RawParam("s1", "messages", json.RawMessage(`[]`)))
	call("s1", 0)
	release := stall.stallNext()
	if n, _ := queued(tel); n != 0 {
		t.Fatalf("%d events queued behind the stalled one", n)
	}

	// A model request (2 events) and 7 tool calls (14 events) fill the
	// queue; then 200 more tool calls, the model's answer and a
	// supervision decision find it full.
	model.in(modelCtx, messages.RawParam("s1", models.ParamModel, json.RawMessage(`"m"`)))
	model.in(modelCtx, messages.End("s1"))
	for i := 1; i <= 7; i++ {
		call("s1", i)
	}
	if n, _ := queued(tel); n != maxQueued {
		t.Fatalf("%d events queued, want %d", n, maxQueued)
	}
	if d := tel.Dropped(); d != 0 {
		t.Fatalf("%d dropped before the queue was full", d)
	}
	for i := 8; i < 208; i++ {
		call("s1", i)
	}
	model.out(messages.Meta("s1", models.MetaUsage, json.RawMessage(`{"prompt_tokens":1,"completion_tokens":1}`)))
	model.out(messages.End("s1"))
	tel.Supervision(supervisor.Event{Time: time.Now(), Child: "test/agent/model", Reason: errors.New("boom")})
	agent.out(messages.End("s1"))
	const wantDropped = 200*2 + 2 + 1 + 1
	if n, c := queued(tel); n != maxQueued || c > maxQueued {
		t.Fatalf("queue length %d, capacity %d: want at most %d", n, c, maxQueued)
	}
	if d := tel.Dropped(); d != wantDropped {
		t.Fatalf("Dropped() = %d, want %d", d, wantDropped)
	}
	if m := droppedMetric(t, reader); m != wantDropped {
		t.Fatalf("%s = %d while stalled, want %d", MetricDropped, m, wantDropped)
	}
	<-warns.got // the burst's warning, logged off the actor's turn

	// A Flush made while the queue is full returns once the processor is
	// released.
	flushed := make(chan error, 1)
	go func() { flushed <- tel.Flush(ctx) }()
	stall.stalling.Store(false)
	close(release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}

	// The 8 tool calls recorded; the run and the request, whose ends were
	// dropped, ended incomplete; nothing else (the dropped calls, the run
	// ended twice).
	spans := exp.GetSpans()
	var tools, runs, chats int
	for _, s := range spans {
		switch s.Name {
		case "execute_tool add":
			tools++
			if spanAttr(s, string(incompleteKey)) != "" {
				t.Errorf("tool span %s marked incomplete", spanAttr(s, "gen_ai.tool.call.id"))
			}
		case "invoke_agent a":
			runs++
			if spanAttr(s, string(incompleteKey)) != "true" {
				t.Errorf("run span not marked incomplete: %v", s.Attributes)
			}
		case "chat m":
			chats++
			if spanAttr(s, string(incompleteKey)) != "true" {
				t.Errorf("chat span not marked incomplete: %v", s.Attributes)
			}
		default:
			t.Errorf("span %q", s.Name)
		}
	}
	if tools != 8 || runs != 1 || chats != 1 {
		t.Fatalf("%d tool, %d run, %d chat spans; want 8, 1, 1", tools, runs, chats)
	}
	if n := chatDurations(t, reader); n != 0 {
		t.Errorf("%d chat durations recorded for an abandoned request", n)
	}
	if len(tel.runs) != 0 || len(tel.active) != 0 || len(agent.runs) != 0 || len(model.open) != 0 || len(model.models) != 0 {
		t.Fatalf("state kept after the drops: runs %v, active %v, agent %v, model %v %v",
			tel.runs, tel.active, agent.runs, model.open, model.models)
	}

	// Recording resumes: a late frame of the abandoned run is ignored, a
	// new run is recorded in full and nothing more is dropped.
	exp.Reset()
	call("s1", 300)
	agent.in(agentCtx, messages.RawParam("s2", "messages", json.RawMessage(`[]`)))
	call("s2", 1)
	model.in(modelCtx, messages.RawParam("s2", models.ParamModel, json.RawMessage(`"m"`)))
	model.in(modelCtx, messages.End("s2"))
	model.out(messages.End("s2"))
	agent.out(messages.End("s2"))
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	spans = exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans after recovery, want 3: %v", len(spans), spans)
	}
	for _, s := range spans {
		if spanAttr(s, string(incompleteKey)) != "" || spanAttr(s, "gen_ai.conversation.id") == "s1" || spanAttr(s, "gen_ai.tool.call.id") == "call_300" {
			t.Errorf("span %s after recovery: %v", s.Name, s.Attributes)
		}
	}
	if n := chatDurations(t, reader); n != 1 {
		t.Errorf("%d chat durations after recovery, want 1", n)
	}
	if d := tel.Dropped(); d != wantDropped {
		t.Errorf("Dropped() = %d after recovery, want %d", d, wantDropped)
	}

	// Shutdown waits for the warning; one burst, one warning.
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := warns.count(); n != 1 {
		t.Errorf("%d warnings for one burst of %d drops, want 1", n, wantDropped)
	}
	if m := droppedMetric(t, reader); m != -1 {
		t.Errorf("%s still reported after Shutdown: %d", MetricDropped, m)
	}
}

// TestQueueFull_EachBurstWarnsOnce: drops after the recorder caught up
// are a new burst, with a warning of its own.
func TestQueueFull_EachBurstWarnsOnce(t *testing.T) {
	warns := newWarnings()
	tel, stall := stalledTelemetry(t, Options{MaxQueued: 4, Logger: slog.New(warns)}, nil, false)
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	ctx := context.Background()
	for burst := range 2 {
		stream := fmt.Sprint("s", burst)
		stall.stalling.Store(true)
		agent.in(c, messages.RawParam(stream, "messages", json.RawMessage(`[]`)))
		agent.out(messages.End(stream))
		release := stall.stallNext() // the run's end is in the processor
		for i := range 4 + 10 {
			agent.out(messages.ToolCall(stream, fmt.Sprint("c", i), "add", nil))
		}
		if d, want := tel.Dropped(), uint64(10*(burst+1)); d != want {
			t.Fatalf("burst %d: Dropped() = %d, want %d", burst, d, want)
		}
		<-warns.got
		stall.stalling.Store(false)
		close(release)
		if err := tel.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := warns.count(); n != 2 {
		t.Fatalf("%d warnings for two bursts, want 2", n)
	}
}

// TestQueueFull_ShutdownWhileStalled: with the processor stalled and
// events dropped, Shutdown returns its context's error instead of
// hanging, a Flush waiting meanwhile is answered once the processor is
// released, and Shutdown then completes.
func TestQueueFull_ShutdownWhileStalled(t *testing.T) {
	tel, stall := stalledTelemetry(t, Options{MaxQueued: 2}, nil, true)
	agent, release := stallRunEnd(stall, tel, "s1")
	for i := range 5 {
		agent.out(messages.ToolCall("s1", fmt.Sprint("c", i), "add", nil))
	}
	if d := tel.Dropped(); d != 3 {
		t.Fatalf("Dropped() = %d, want 3", d)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- tel.Flush(context.Background()) }()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tel.Shutdown(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown while stalled: %v, want context.Canceled", err)
	}
	agent.out(messages.ToolCall("s1", "late", "add", nil)) // after Shutdown: neither queued nor counted
	if d := tel.Dropped(); d != 3 {
		t.Fatalf("Dropped() = %d after Shutdown, want 3", d)
	}
	stall.stalling.Store(false)
	close(release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestQueueFull_LaterFramesOfAbandonedRun: once a run is abandoned
// after its events were dropped, the frames its agent still gets on the
// stream (an approval, a parameter) or emits start no run and are not
// recorded; a new request on the stream is a new run, recorded in full.
func TestQueueFull_LaterFramesOfAbandonedRun(t *testing.T) {
	const maxQueued = 8 // room for the later frames
	exp := tracetest.NewInMemoryExporter()
	tel, stall := stalledTelemetry(t, Options{MaxQueued: maxQueued}, exp, false)
	ctx := context.Background()
	c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent"))}
	agent := &agentObserver{t: tel, name: "a"}
	request := func(stream string) {
		agent.in(c, messages.RawParam(stream, models.ParamMessages, json.RawMessage(`[]`)))
	}

	// s1's run is open when s0's end stalls in the processor; s1 then
	// loses events.
	request("s1")
	request("s0")
	agent.out(messages.End("s0"))
	release := stall.stallNext()
	for i := range maxQueued + 3 {
		agent.out(messages.ToolCall("s1", fmt.Sprint("c", i), "add", nil))
	}
	catchUp(ctx, t, tel, stall, release, 3)

	// Later frames of s1's run.
	agent.in(c, tools.ApprovalFrame("s1", tools.ApprovalAnswer{ToolCallID: "c0", Decision: tools.DecisionApprove}))
	agent.in(c, messages.RawParam("s1", "temperature", json.RawMessage(`0`)))
	agent.out(messages.ToolCall("s1", "late", "add", nil))
	agent.out(messages.RawToolResult("s1", "late", "add", []byte(`2`)))
	agent.out(messages.End("s1"))
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := tel.Dropped(); d != 3 {
		t.Fatalf("Dropped() = %d after the later frames, want 3", d)
	}
	if len(tel.runs) != 0 || len(tel.active) != 0 || len(agent.runs) != 0 {
		t.Fatalf("state kept for an abandoned run: runs %v, active %v, agent %v", tel.runs, tel.active, agent.runs)
	}
	var s0, s1 int
	for _, s := range exp.GetSpans() {
		switch {
		case s.Name == "invoke_agent a" && spanAttr(s, "gen_ai.conversation.id") == "s0" && spanAttr(s, string(incompleteKey)) == "":
			s0++
		case s.Name == "invoke_agent a" && spanAttr(s, "gen_ai.conversation.id") == "s1" && spanAttr(s, string(incompleteKey)) == "true":
			s1++
		case s.Name == "execute_tool add" && spanAttr(s, string(incompleteKey)) == "true": // open in s1's run
		default:
			t.Errorf("span %s %v", s.Name, s.Attributes)
		}
	}
	if s0 != 1 || s1 != 1 {
		t.Fatalf("%d runs of s0, %d abandoned runs of s1; want 1 and 1", s0, s1)
	}

	// A new request on s1.
	exp.Reset()
	request("s1")
	agent.out(messages.End("s1"))
	if err := tel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spanAttr(spans[0], "gen_ai.conversation.id") != "s1" || spanAttr(spans[0], string(incompleteKey)) != "" {
		t.Fatalf("spans of a new request on s1: %v", spans)
	}
}

// TestQueueFull_NextRequestKeepsItsModel: when only the answer of a
// stream's request lost events, the next request on the stream, whose
// model was written before the drops and whose own frames all came, is
// recorded with its model. When that request's END was lost instead, the
// request is not recorded and its model is forgotten.
func TestQueueFull_NextRequestKeepsItsModel(t *testing.T) {
	for _, requestLost := range []bool{false, true} {
		t.Run(fmt.Sprint("request lost ", requestLost), func(t *testing.T) {
			const maxQueued = 4
			exp := tracetest.NewInMemoryExporter()
			tel, stall := stalledTelemetry(t, Options{MaxQueued: maxQueued}, exp, false)
			ctx := context.Background()
			c := nullContext{self: actors.RefOf(actor.NewPID("test", "agent/model"))}
			model := &modelObserver{t: tel, provider: "p"}
			param := func(stream, name string) {
				model.in(c, messages.RawParam(stream, models.ParamModel, json.RawMessage(`"`+name+`"`)))
			}

			// s1's first request is answered and its next one written
			// when s0's request ends in the stalled processor; then s1
			// loses the first answer's end, or the next request's END.
			param("s1", "m1")
			model.in(c, messages.End("s1"))
			param("s1", "m2")
			if err := tel.Flush(ctx); err != nil { // no span ends yet
				t.Fatal(err)
			}
			param("s0", "m0")
			model.in(c, messages.End("s0"))
			model.out(messages.End("s0"))
			release := stall.stallNext()
			for range maxQueued {
				model.out(messages.Meta("s1", models.MetaFinish, json.RawMessage(`"stop"`)))
			}
			if requestLost {
				model.in(c, messages.End("s1"))
			} else {
				model.out(messages.End("s1"))
			}
			catchUp(ctx, t, tel, stall, release, 1)
			exp.Reset()

			if requestLost {
				// The lost request's answer is not recorded; the tap
				// keeps nothing.
				model.out(messages.End("s1"))
				if err := tel.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if len(model.models) != 0 || len(model.open) != 0 || len(tel.active) != 0 {
					t.Fatalf("state kept for a lost request: models %v, open %v, active %v", model.models, model.open, tel.active)
				}
				if spans := exp.GetSpans(); len(spans) != 0 {
					t.Fatalf("%d spans for a lost request", len(spans))
				}
				return
			}
			// The next request is sent and answered.
			model.in(c, messages.End("s1"))
			model.out(messages.End("s1"))
			if err := tel.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 || spans[0].Name != "chat m2" || spanAttr(spans[0], "gen_ai.request.model") != "m2" || spanAttr(spans[0], string(incompleteKey)) != "" {
				for _, s := range spans {
					t.Errorf("span %s %v", s.Name, s.Attributes)
				}
				t.Fatalf("%d spans of the next request, want chat m2", len(spans))
			}
		})
	}
}
