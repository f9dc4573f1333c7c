package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/polyweave/polyweave-go/telemetry"

// Names of the metrics (see the package doc).
const (
	MetricOperationDuration = "gen_ai.client.operation.duration"
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricSupervision       = "polyweave.supervision.decisions"
	MetricBreakerState      = "polyweave.tool.breaker.state"
	MetricStoreDuration     = "polyweave.store.operation.duration"
	MetricDropped           = "polyweave.telemetry.dropped"
)

// Options configure [New]. A nil *Options or a zero field means the
// default (without providers, nothing is recorded).
type Options struct {
	// TracerProvider receives the spans; nil (also a nil pointer, such
	// as a nil *sdktrace.TracerProvider, or a no-op provider) turns
	// tracing off.
	TracerProvider trace.TracerProvider
	// MeterProvider receives the metrics; nil (also a nil pointer, or a
	// no-op provider) turns metrics off.
	MeterProvider metric.MeterProvider
	// AgentName is gen_ai.agent.name of the run spans; default: the
	// name of the tapped spec (an agent's name).
	AgentName string
	// ConversationID, when set, gives the gen_ai.conversation.id of a
	// run span from the run's stream id; default: the stream id. By the
	// GenAI conventions the attribute is the conversation's (session's,
	// thread's) id, shared by every run of the conversation. A bare tool
	// loop's stream is its conversation, but an agent of package agent
	// runs each attempt of a session on a stream of its own (the session
	// id, then "<session>#<n>", with '#' and '%' of the session escaped:
	// agent.StreamID): it taps its loop with its own mapping to the
	// session ([Telemetry.AgentConversations]), which this one, when set,
	// overrides for every tap. It runs on the recorder goroutine, and must
	// be quick; an empty id leaves the attribute out. Runs and model
	// requests are matched by stream id whatever it returns.
	ConversationID func(stream string) string
	// MaxQueued bounds the events waiting for the recorder goroutine;
	// default (zero or less): [DefaultMaxQueued]. When the span processors
	// or the meter do not keep up and the queue is full, events are
	// dropped instead of making the actors wait: [Telemetry.Dropped] and
	// the counter polyweave.telemetry.dropped count them, the Logger gets
	// one warning per burst of drops, and once the recorder has caught up
	// with the burst the spans then open of the streams whose events were
	// dropped are ended, marked with polyweave.telemetry.incomplete (their
	// ends may have been dropped), without duration metrics; later frames
	// of those runs and requests are not recorded, new ones are, and the
	// other streams' spans go on. When the drops cannot be told apart by
	// stream (a supervision decision was dropped, or more than 16 streams
	// lost events in one burst), every span open then is ended so.
	MaxQueued int
	// Logger receives the warnings (events dropped) and the panics of
	// the providers' span processors, exporters or meter that the
	// recorder contained; default: discard.
	Logger *slog.Logger
}

// Telemetry records the spans and metrics of the duplexes it taps and of
// the events it is given. It is safe for concurrent use.
type Telemetry struct {
	tracing, metering bool
	tracer            trace.Tracer
	agentName         string
	conversation      func(stream string) string // Options.ConversationID; wins over a tap's

	duration    metric.Float64Histogram
	tokens      metric.Int64Histogram
	supervision metric.Int64Counter
	breaker     metric.Int64Gauge
	store       metric.Float64Histogram

	rec        *recorder // nil when nothing is recorded
	logger     *slog.Logger
	unregister func() error // of the callback reporting MetricDropped; nil without metrics

	// Only used by the recorder's goroutine:
	runs map[string]*liveRun // stream id → the newest run open on it
	// active holds the taps' handlers that keep state (spans open).
	active map[handler]struct{}
	// names holds span names ("execute_tool add", "chat gpt-4o") by
	// their parts, so that a span's name is not built anew each time.
	names map[[2]string]string
	// toolNames holds the tool names the duration metric has series for
	// (see toolSeries).
	toolNames map[string]struct{}
	// finishReasons holds gen_ai.response.finish_reasons attributes by
	// reason (a string slice attribute is a copy of its slice).
	finishReasons map[string]attribute.KeyValue
	// scratch holds the attributes of a span being started or ended (a
	// tracer copies them). Nothing that may start or end another span
	// runs between filling it and handing it to the tracer.
	scratch []attribute.KeyValue
	// startOpts and endOpts hold the options of the span being started or
	// ended, so that a call does not allocate its variadic slice (a tracer
	// reads the options during the call and keeps none of them).
	startOpts []trace.SpanStartOption
	endOpts   [1]trace.SpanEndOption
	// Records of ended runs, requests and tool calls, reused for the next
	// ones.
	spareRuns  spares[liveRun]
	spareChats spares[chat]
	spareTools spares[toolSpan]
}

// spares keeps up to maxSpare records no longer used, to be reused
// instead of allocated.
type spares[T any] struct{ free []*T }

const maxSpare = 64

// get returns a spare record, or a new zero one.
func (s *spares[T]) get() *T {
	n := len(s.free)
	if n == 0 {
		return new(T)
	}
	x := s.free[n-1]
	s.free[n-1] = nil
	s.free = s.free[:n-1]
	return x
}

// put sets x, which nothing refers to any more, to zero (a zero record,
// or one that keeps some of x's buffers) and keeps it as a spare.
func (s *spares[T]) put(x *T, zero T) {
	if len(s.free) < maxSpare {
		*x = zero
		s.free = append(s.free, x)
	}
}

// startSpan starts a span at at, of kind, with attrs (the tracer copies
// them: attrs may be the scratch slice), under parent. When a span
// processor panics in it, the panic is contained (see recorder.contain)
// and the span is a no-op one, under parent still: what the taps keep
// goes on as if it had started.
//
// Once Shutdown gave up, nothing more goes to the processors: the span
// is that no-op one.
func (t *Telemetry) startSpan(parent context.Context, name string, at time.Time, kind trace.SpanStartOption, attrs []attribute.KeyValue) (ctx context.Context, span trace.Span) {
	ctx, span = parent, noSpan
	if t.rec.givenUp() {
		return
	}
	defer t.rec.contain()
	opts := append(t.startOpts[:0], trace.WithTimestamp(at), kind, trace.WithAttributes(attrs...))
	t.startOpts = opts
	defer clear(opts) // keep nothing of this span alive
	return t.tracer.Start(parent, name, opts...)
}

// measure records a duration of seconds with attrs. A panic of the
// meter in it is contained (see recorder.contain): the taps go on as if
// it had been recorded.
func (t *Telemetry) measure(seconds float64, attrs []attribute.KeyValue) {
	if t.rec.givenUp() {
		return
	}
	defer t.rec.contain()
	t.duration.Record(context.Background(), seconds, metric.WithAttributes(attrs...))
}

// noSpan is the span startSpan returns when it hands nothing to the
// processors (one panicked, or Shutdown gave up).
var noSpan = trace.SpanFromContext(context.Background())

// endSpan ends span at at. A panic of a span processor in it is
// contained (see recorder.contain): the span ends for the taps, which go
// on as if it had been handed over. Once Shutdown gave up, the span is
// not ended: nothing more goes to the processors.
func (t *Telemetry) endSpan(span trace.Span, at time.Time) {
	if t.rec.givenUp() {
		return
	}
	defer t.rec.contain()
	t.endOpts[0] = trace.WithTimestamp(at)
	defer func() { t.endOpts[0] = nil }()
	span.End(t.endOpts[:]...)
}

// Up to this many span names and finish reasons are kept.
const maxCached = 256

// spanName returns prefix + " " + name (prefix alone when name is
// empty), built once; name is clipped (see clipText: a tool's name may
// be one the model made up).
func (t *Telemetry) spanName(prefix, name string) string {
	if name == "" {
		return prefix
	}
	k := [2]string{prefix, name}
	if n, ok := t.names[k]; ok {
		return n
	}
	n := prefix + " " + clipText(name)
	if len(t.names) < maxCached && len(name) <= maxDescription { // a clipped name is not kept whole
		t.names[k] = n
	}
	return n
}

// finishReason returns the gen_ai.response.finish_reasons attribute of
// a META finish payload (a JSON string), and whether it is one.
func (t *Telemetry) finishReason(payload []byte) (attribute.KeyValue, bool) {
	if n := len(payload); n >= 2 && payload[0] == '"' && payload[n-1] == '"' {
		if kv, ok := t.finishReasons[string(payload[1:n-1])]; ok { // no escapes in a cached reason
			return kv, true
		}
	}
	var reason string
	if json.Unmarshal(payload, &reason) != nil {
		return attribute.KeyValue{}, false
	}
	kv := attribute.StringSlice("gen_ai.response.finish_reasons", []string{reason})
	if len(t.finishReasons) < maxCached && `"`+reason+`"` == string(payload) {
		t.finishReasons[reason] = kv
	}
	return kv, true
}

// liveRun is a run open in some agent, as the other taps see it.
type liveRun struct {
	ctx   context.Context // carries the run span
	span  trace.Span
	actor string      // id of the agent's actor; its descendants' ids start with it + "/"
	tools []*toolSpan // open tool calls
	next  *liveRun    // an older run open on the same stream id (in another agent)
}

// New makes a Telemetry.
func New(opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	t := &Telemetry{agentName: o.AgentName, conversation: o.ConversationID, logger: o.Logger, runs: map[string]*liveRun{}, active: map[handler]struct{}{},
		names: map[[2]string]string{}, toolNames: map[string]struct{}{}, finishReasons: map[string]attribute.KeyValue{}}
	if t.logger == nil {
		t.logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = DefaultMaxQueued
	}
	// A typed nil (a nil *sdktrace.TracerProvider a host left unset)
	// is no provider, as an untyped nil is.
	if nilPointer(o.TracerProvider) {
		o.TracerProvider = nil
	}
	if nilPointer(o.MeterProvider) {
		o.MeterProvider = nil
	}
	switch o.TracerProvider.(type) {
	case nil, tracenoop.TracerProvider, *tracenoop.TracerProvider:
		t.tracer = tracenoop.NewTracerProvider().Tracer(ScopeName)
	default:
		t.tracing = true
		t.tracer = o.TracerProvider.Tracer(ScopeName)
	}
	mp := o.MeterProvider
	switch mp.(type) {
	case nil, metricnoop.MeterProvider, *metricnoop.MeterProvider:
		mp = metricnoop.NewMeterProvider()
	default:
		t.metering = true
	}
	meter := mp.Meter(ScopeName)
	var errs [6]error
	t.duration, errs[0] = meter.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of model requests (chat) and tool calls (execute_tool)"))
	t.tokens, errs[1] = meter.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used per model request, by gen_ai.token.type"))
	t.supervision, errs[2] = meter.Int64Counter(MetricSupervision, metric.WithUnit("{decision}"),
		metric.WithDescription("Supervision decisions (restarts, stops, escalations) by stage and cause"))
	t.breaker, errs[3] = meter.Int64Gauge(MetricBreakerState, metric.WithUnit("1"),
		metric.WithDescription("State of a tool's circuit breaker: 0 closed, 1 open, 2 half-open"))
	t.store, errs[4] = meter.Float64Histogram(MetricStoreDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of durable store writes (commits) and reads"))
	var dropped metric.Int64ObservableCounter
	dropped, errs[5] = meter.Int64ObservableCounter(MetricDropped, metric.WithUnit("{event}"),
		metric.WithDescription("Events dropped because the telemetry queue was full (the span processors or the meter did not keep up)"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("telemetry: instruments: %w", err)
	}
	if !t.tracing && !t.metering {
		return t, nil
	}
	t.rec = startRecorder(t, o.MaxQueued)
	if t.metering {
		reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(dropped, int64(t.rec.dropped.Load()))
			return nil
		}, dropped)
		if err != nil {
			_ = t.Shutdown(context.Background())
			return nil, fmt.Errorf("telemetry: registering the %s callback: %w", MetricDropped, err)
		}
		t.unregister = sync.OnceValue(reg.Unregister)
	}
	return t, nil
}

// nilPointer reports whether v is a nil pointer in a non-nil interface.
func nilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Tracing reports whether spans are recorded (a tracer provider was
// given).
func (t *Telemetry) Tracing() bool { return t.tracing }

func (t *Telemetry) addRun(stream string, r *liveRun) {
	r.next = t.runs[stream]
	t.runs[stream] = r
}

func (t *Telemetry) removeRun(stream string, r *liveRun) {
	p := t.runs[stream]
	if p == r {
		if r.next == nil {
			delete(t.runs, stream)
		} else {
			t.runs[stream] = r.next
		}
		return
	}
	for ; p != nil; p = p.next {
		if p.next == r {
			p.next = r.next
			return
		}
	}
}

// runContext returns the context of the run open on stream in the agent
// that actor (a model adapter) belongs to, or the background when none.
func (t *Telemetry) runContext(stream, actor string) context.Context {
	for r := t.runs[stream]; r != nil; r = r.next {
		if within(actor, r.actor) {
			return r.ctx
		}
	}
	return context.Background()
}

// enclosing returns the context a run of the agent actor (named name)
// starts in: the open tool call of the innermost run of another agent
// whose actor contains it (the tool call named name when there are
// several, the run itself when that is ambiguous), or the background.
func (t *Telemetry) enclosing(actor, name string) context.Context {
	var outer *liveRun
	for _, r := range t.runs {
		for ; r != nil; r = r.next {
			if r.actor != actor && within(actor, r.actor) && (outer == nil || len(r.actor) > len(outer.actor)) {
				outer = r
			}
		}
	}
	if outer == nil {
		return context.Background()
	}
	if len(outer.tools) == 1 {
		return t.toolContext(outer, outer.tools[0])
	}
	for i := len(outer.tools) - 1; i >= 0; i-- {
		if ts := outer.tools[i]; ts.name == name {
			return t.toolContext(outer, ts)
		}
	}
	return outer.ctx
}

// within reports whether actor id is root or one of its descendants.
func within(id, root string) bool {
	return id == root || (strings.HasPrefix(id, root) && len(id) > len(root) && id[len(root)] == '/')
}

// Supervision records a supervision decision: the counter
// polyweave.supervision.decisions (by polyweave.stage, error.type and
// polyweave.supervision.directive) and a "supervision" span event on every
// open run whose agent the failed actor belongs to. Give it to the
// runtime as RuntimeOptions.OnSupervision (or call it from there). It is
// quick: the decision is queued for the recorder.
func (t *Telemetry) Supervision(ev supervisor.Event) {
	if t.rec != nil {
		t.rec.put(&event{kind: evSupervision, sup: &ev})
	}
}

func (t *Telemetry) recordSupervision(ev *supervisor.Event) {
	stage, cause := Stage(ev.Child), Cause(ev.Reason)
	directive := ev.Directive.String()
	if t.metering {
		t.supervision.Add(context.Background(), 1, metric.WithAttributes(
			attribute.String("polyweave.stage", stage),
			attribute.String("error.type", cause),
			attribute.String("polyweave.supervision.directive", directive)))
	}
	if !t.tracing {
		return
	}
	var spans []trace.Span
	for _, r := range t.runs {
		for ; r != nil; r = r.next {
			if within(ev.Child, r.actor) || within(r.actor, ev.Child) {
				spans = append(spans, r.span)
			}
		}
	}
	if len(spans) == 0 {
		return
	}
	reason := ""
	if ev.Reason != nil {
		reason = clipText(ev.Reason.Error())
	}
	event := trace.WithAttributes(
		attribute.String("polyweave.supervision.directive", directive),
		attribute.String("polyweave.supervision.child", ev.Child),
		attribute.String("polyweave.stage", stage),
		attribute.String("error.type", cause),
		attribute.String("polyweave.supervision.reason", reason),
		attribute.Int("polyweave.supervision.failures", ev.Failures),
		attribute.Bool("polyweave.supervision.intensity_exceeded", ev.IntensityExceeded))
	for _, s := range spans {
		s.AddEvent("supervision", event, trace.WithTimestamp(ev.Time))
	}
}

// Stage names the stage an actor id stands for: its last path element
// that is not an anonymous "$n".
func Stage(actorID string) string {
	rest := actorID
	for rest != "" {
		i := strings.LastIndexByte(rest, '/')
		last := rest[i+1:]
		if !strings.HasPrefix(last, "$") {
			return last
		}
		if i < 0 {
			break
		}
		rest = rest[:i]
	}
	return actorID
}

// Cause classifies a failure for metrics: "panic", "store" (a
// *durability.StoreError), "inner_stopped", or the Go type of the error.
func Cause(err error) string {
	var p *actors.PanicError
	var s *durability.StoreError
	var in *actors.InnerStoppedError
	switch {
	case err == nil:
		return "unknown"
	case errors.As(err, &p):
		return "panic"
	case errors.As(err, &s):
		return "store"
	case errors.As(err, &in):
		return "inner_stopped"
	}
	return fmt.Sprintf("%T", err)
}

// BreakerChanged records a tool's circuit breaker changing state (the
// gauge polyweave.tool.breaker.state by gen_ai.tool.name). Give it to a
// router or loop as BreakerOptions.OnChange.
func (t *Telemetry) BreakerChanged(tool string, state tools.BreakerState) {
	if !t.metering {
		return
	}
	t.breaker.Record(context.Background(), int64(state), metric.WithAttributes(attribute.String("gen_ai.tool.name", tool)))
}
