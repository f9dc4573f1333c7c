package telemetry

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// Agent taps the outermost stage of an agent (a tool loop), see the
// package doc. The spec keeps its name, supervision and persistence: no
// actor is added. With neither tracing nor metrics on, it returns inner
// unchanged.
func (t *Telemetry) Agent(inner actors.Spec) actors.Spec {
	if t.rec == nil {
		return inner
	}
	name := t.agentName
	if name == "" {
		name = inner.Name
	}
	return tap(inner, func() observer { return &agentObserver{t: t, name: name} })
}

// toolSpan is a tool call open in a run. Its span is started when the
// call is answered, with all its attributes at once, or earlier when a
// run nested in the call needs it as a parent (toolContext).
type toolSpan struct {
	name, callID string
	start        time.Time
	ctx          context.Context // carries span; nil until the span is started
	span         trace.Span
}

// agentObserver is the tap of one incarnation of an agent. in, out and
// failed run in the agent's turn and only queue events; the rest runs on
// the recorder's goroutine.
type agentObserver struct {
	listed
	t    *Telemetry
	name string // gen_ai.agent.name

	runs     map[string]*liveRun // by stream id
	untraced map[string]toolSpan // with metrics only: stream and call id → call
}

// in records the request that starts a run: its messages. Nothing else
// an agent gets starts one: a stream's later frames (an approval, a
// cancellation) may come after its run ended, or was abandoned when
// events were dropped, and a run started by them would never end.
func (o *agentObserver) in(c actors.Context, f *messages.Frame) {
	if !o.t.tracing || !f.IsParam(models.ParamMessages) {
		return
	}
	ev := frameEvent(evIn, o, f)
	ev.actor = c.Self().String()
	o.t.rec.put(&ev)
}

func (o *agentObserver) out(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR, messages.FrameType_END:
		ev := frameEvent(evOut, o, f)
		o.t.rec.put(&ev)
	}
}

func (o *agentObserver) failed(_ actors.Context, err error) {
	o.t.rec.put(&event{kind: evFailed, to: o, at: time.Now(), err: err})
}

func (o *agentObserver) handle(ev *event) {
	switch {
	case ev.kind == evFailed:
		o.failedAll(ev)
	case !o.t.tracing:
		o.untracedOut(ev)
	case ev.kind == evIn:
		o.start(ev)
	default:
		o.tracedOut(ev)
	}
}

// start opens the run of a stream at its request. A run started
// inside another agent's run (an agent called as a tool runs under the
// calling tool's actor) is a child of that run's tool call: one trace
// for the whole delegation.
func (o *agentObserver) start(ev *event) {
	if _, ok := o.runs[ev.stream]; ok {
		return
	}
	// The parent first: finding it may start the calling tool's span,
	// which fills the scratch slice too.
	parent := o.t.enclosing(ev.actor, o.name)
	attrs := append(o.t.scratch[:0], opInvokeAgent, attribute.String("gen_ai.agent.name", o.name),
		attribute.String("gen_ai.conversation.id", ev.stream))
	o.t.scratch = attrs
	ctx, span := o.t.startSpan(parent, o.t.spanName("invoke_agent", o.name), ev.at, internalKind, attrs)
	r := o.t.spareRuns.get()
	r.ctx, r.span, r.actor = ctx, span, ev.actor
	if o.runs == nil {
		o.runs = map[string]*liveRun{}
	}
	o.runs[ev.stream] = r
	o.t.addRun(ev.stream, r)
}

// Attributes every span of a kind has.
var (
	opInvokeAgent = attribute.String("gen_ai.operation.name", "invoke_agent")
	opExecuteTool = attribute.String("gen_ai.operation.name", "execute_tool")
	opChat        = attribute.String("gen_ai.operation.name", "chat")
	outcomeOK     = attribute.String("polyweave.tool.outcome", "ok")
	outcomeError  = attribute.String("polyweave.tool.outcome", "error")
	clientKind    = trace.WithSpanKind(trace.SpanKindClient)
	internalKind  = trace.WithSpanKind(trace.SpanKindInternal)
	// incomplete marks a span ended because events were dropped: its end
	// time is when the drops began, and what came after is missing.
	incomplete = incompleteKey.Bool(true)
)

// incompleteKey is the attribute of spans ended because events were
// dropped.
const incompleteKey = attribute.Key("polyweave.telemetry.incomplete")

// toolContext returns the context of a tool call's span, started now if
// it was not.
func (t *Telemetry) toolContext(r *liveRun, ts *toolSpan) context.Context {
	if ts.span == nil {
		attrs := append(t.scratch[:0], opExecuteTool, attribute.String("gen_ai.tool.name", ts.name), attribute.String("gen_ai.tool.call.id", ts.callID))
		t.scratch = attrs
		ts.ctx, ts.span = t.startSpan(r.ctx, t.spanName("execute_tool", ts.name), ts.start, internalKind, attrs)
	}
	return ts.ctx
}

// endTool ends a tool call's span: with its outcome, and for a failure
// the failure kind as error.type and status (the span is started here,
// with all its attributes, if no nested run needed it before).
func (t *Telemetry) endTool(r *liveRun, ts *toolSpan, outcome attribute.KeyValue, kind, status string, at time.Time) {
	attrs := append(t.scratch[:0], opExecuteTool, attribute.String("gen_ai.tool.name", ts.name), attribute.String("gen_ai.tool.call.id", ts.callID), outcome)
	if kind != "" {
		attrs = append(attrs, attribute.String("error.type", kind))
	}
	t.scratch = attrs
	if ts.span == nil {
		_, ts.span = t.startSpan(r.ctx, t.spanName("execute_tool", ts.name), ts.start, internalKind, attrs)
	} else {
		ts.span.SetAttributes(attrs[3:]...)
	}
	if status != "" {
		ts.span.SetStatus(codes.Error, status)
	}
	t.endSpan(ts.span, at)
}

func (o *agentObserver) tracedOut(ev *event) {
	r := o.runs[ev.stream]
	if r == nil {
		return
	}
	switch ev.ftype {
	case messages.FrameType_TOOL_CALL:
		for _, ts := range r.tools {
			if ts.callID == ev.callID {
				return
			}
		}
		ts := o.t.spareTools.get()
		ts.name, ts.callID, ts.start = ev.name, ev.callID, ev.at
		r.tools = append(r.tools, ts)
	case messages.FrameType_TOOL_RESULT:
		i := len(r.tools) - 1
		for i >= 0 && r.tools[i].callID != ev.callID {
			i--
		}
		if i < 0 {
			return
		}
		ts := r.tools[i]
		r.tools = slices.Delete(r.tools, i, i+1)
		outcome, kind := toolOutcome(ev)
		if kind != "" {
			o.t.endTool(r, ts, outcomeError, kind, string(ev.payload), ev.at)
		} else {
			o.t.endTool(r, ts, outcomeOK, "", "", ev.at)
		}
		o.t.recordTool(ts.name, outcome, kind, ev.at.Sub(ts.start))
		o.t.spareTools.put(ts, toolSpan{})
	case messages.FrameType_ERROR:
		r.span.SetStatus(codes.Error, ev.text)
		r.span.SetAttributes(attribute.String("error.type", "run_error"))
	case messages.FrameType_END:
		o.end(ev.stream, r, "", false, ev.at)
	}
}

// untracedOut keeps the tool-call metrics when only metrics are on.
func (o *agentObserver) untracedOut(ev *event) {
	key := ev.stream + "\x00" + ev.callID
	switch ev.ftype {
	case messages.FrameType_TOOL_CALL:
		if o.untraced == nil {
			o.untraced = map[string]toolSpan{}
		}
		o.untraced[key] = toolSpan{name: ev.name, start: ev.at}
	case messages.FrameType_TOOL_RESULT:
		if call, ok := o.untraced[key]; ok {
			delete(o.untraced, key)
			outcome, kind := toolOutcome(ev)
			o.t.recordTool(call.name, outcome, kind, ev.at.Sub(call.start))
		}
	}
}

// toolOutcome is "ok", or "error" with the failure kind of a failed result.
func toolOutcome(ev *event) (outcome, kind string) {
	if !ev.isError {
		return "ok", ""
	}
	if ev.text == "" {
		return "error", "error"
	}
	return "error", ev.text
}

func (t *Telemetry) recordTool(name, outcome, kind string, d time.Duration) {
	if !t.metering {
		return
	}
	attrs := []attribute.KeyValue{opExecuteTool,
		attribute.String("gen_ai.tool.name", name), attribute.String("polyweave.tool.outcome", outcome)}
	if kind != "" {
		attrs = append(attrs, attribute.String("error.type", kind))
	}
	t.duration.Record(context.Background(), d.Seconds(), metric.WithAttributes(attrs...))
}

// end ends a run; failure, when set, is why its agent stopped under it.
// An abandoned run (events were dropped) and its calls are marked
// incomplete.
func (o *agentObserver) end(stream string, r *liveRun, failure string, abandoned bool, at time.Time) {
	for _, ts := range r.tools { // a call without a result: the run ended under it
		o.t.toolContext(r, ts)
		end := at
		if abandoned {
			ts.span.SetAttributes(incomplete)
			end = notBefore(at, ts.start)
		} else {
			ts.span.SetStatus(codes.Error, "no result")
		}
		o.t.endSpan(ts.span, end)
		o.t.spareTools.put(ts, toolSpan{})
	}
	clear(r.tools)
	if abandoned {
		r.span.SetAttributes(incomplete)
	}
	if failure != "" {
		r.span.SetStatus(codes.Error, failure)
		r.span.SetAttributes(attribute.String("error.type", "agent_failed"))
	}
	o.t.endSpan(r.span, at)
	delete(o.runs, stream)
	o.t.removeRun(stream, r)
	clear(r.tools)
	o.t.spareRuns.put(r, liveRun{tools: r.tools[:0]}) // its tools slice kept
}

// failedAll ends the runs still open: the runtime closes their streams
// with ERROR and END, which the tap does not see.
func (o *agentObserver) failedAll(ev *event) {
	for id, r := range o.runs {
		r.span.AddEvent("agent_failed", trace.WithTimestamp(ev.at), trace.WithAttributes(
			attribute.String("error.type", Cause(ev.err)), attribute.String("polyweave.failure", ev.err.Error())))
		o.end(id, r, ev.err.Error(), false, ev.at)
	}
	o.untraced = nil
}

// notBefore returns at, or start when at is before it: the time a
// span abandoned at at ends.
func notBefore(at, start time.Time) time.Time {
	if at.Before(start) {
		return start
	}
	return at
}

func (o *agentObserver) idle() bool { return len(o.runs) == 0 && len(o.untraced) == 0 }

func (o *agentObserver) abandon(at time.Time) {
	for id, r := range o.runs {
		o.end(id, r, "", true, at)
	}
	o.untraced = nil
}

func (o *agentObserver) abandonStream(stream string, _ bool, at time.Time) {
	if r := o.runs[stream]; r != nil {
		o.end(stream, r, "", true, at)
	}
	for k := range o.untraced { // keys are stream + "\x00" + call id
		if len(k) > len(stream) && k[len(stream)] == 0 && k[:len(stream)] == stream {
			delete(o.untraced, k)
		}
	}
}
