package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
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

type toolSpan struct {
	ctx   context.Context // carries span
	span  trace.Span
	name  string
	start time.Time
}

// agentObserver is the tap of one incarnation of an agent. in, out and
// failed run in the agent's turn and only queue events; the rest runs on
// the recorder's goroutine.
type agentObserver struct {
	t    *Telemetry
	name string // gen_ai.agent.name

	runs     map[string]*liveRun // by stream id
	untraced map[string]toolSpan // with metrics only: stream and call id → call
}

func (o *agentObserver) in(c actors.Context, f *messages.Frame) {
	if !o.t.tracing {
		return
	}
	switch f.GetType() {
	case messages.FrameType_CANCEL, messages.FrameType_ABORT, messages.FrameType_TOOL_RESULT, messages.FrameType_END:
		return
	}
	ev := frameEvent(evIn, o, f)
	ev.actor = c.Self().String()
	o.t.rec.put(ev)
}

func (o *agentObserver) out(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR, messages.FrameType_END:
		o.t.rec.put(frameEvent(evOut, o, f))
	}
}

func (o *agentObserver) failed(_ actors.Context, err error) {
	o.t.rec.put(event{kind: evFailed, to: o, at: time.Now(), err: err})
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

// start opens the run of a stream at its first frame. A run started
// inside another agent's run (an agent called as a tool runs under the
// calling tool's actor) is a child of that run's tool call: one trace
// for the whole delegation.
func (o *agentObserver) start(ev *event) {
	if _, ok := o.runs[ev.stream]; ok {
		return
	}
	ctx, span := o.t.tracer.Start(o.t.enclosing(ev.actor, o.name), "invoke_agent "+o.name,
		trace.WithTimestamp(ev.at), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", o.name),
			attribute.String("gen_ai.conversation.id", ev.stream)))
	r := &liveRun{ctx: ctx, span: span, actor: ev.actor, tools: map[string]*toolSpan{}}
	if o.runs == nil {
		o.runs = map[string]*liveRun{}
	}
	o.runs[ev.stream] = r
	o.t.addRun(ev.stream, r)
}

func (o *agentObserver) tracedOut(ev *event) {
	r := o.runs[ev.stream]
	if r == nil {
		return
	}
	switch ev.ftype {
	case messages.FrameType_TOOL_CALL:
		if _, dup := r.tools[ev.callID]; dup {
			return
		}
		ctx, span := o.t.tracer.Start(r.ctx, "execute_tool "+ev.name,
			trace.WithTimestamp(ev.at), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", ev.name),
				attribute.String("gen_ai.tool.call.id", ev.callID)))
		r.tools[ev.callID] = &toolSpan{ctx: ctx, span: span, name: ev.name, start: ev.at}
	case messages.FrameType_TOOL_RESULT:
		ts, ok := r.tools[ev.callID]
		if !ok {
			return
		}
		delete(r.tools, ev.callID)
		outcome, kind := toolOutcome(ev)
		if kind != "" {
			ts.span.SetStatus(codes.Error, string(ev.payload))
			ts.span.SetAttributes(attribute.String("error.type", kind), attribute.String("polyweave.tool.outcome", outcome))
		} else {
			ts.span.SetAttributes(attribute.String("polyweave.tool.outcome", outcome))
		}
		ts.span.End(trace.WithTimestamp(ev.at))
		o.t.recordTool(ts.name, outcome, kind, ev.at.Sub(ts.start))
	case messages.FrameType_ERROR:
		r.span.SetStatus(codes.Error, ev.text)
		r.span.SetAttributes(attribute.String("error.type", "run_error"))
	case messages.FrameType_END:
		o.end(ev.stream, r, "", ev.at)
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
	attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", name), attribute.String("polyweave.tool.outcome", outcome)}
	if kind != "" {
		attrs = append(attrs, attribute.String("error.type", kind))
	}
	t.duration.Record(context.Background(), d.Seconds(), metric.WithAttributes(attrs...))
}

// end ends a run; failure, when set, is why its agent stopped under it.
func (o *agentObserver) end(stream string, r *liveRun, failure string, at time.Time) {
	for id, ts := range r.tools { // a call without a result: the run ended under it
		ts.span.SetStatus(codes.Error, "no result")
		ts.span.End(trace.WithTimestamp(at))
		delete(r.tools, id)
	}
	if failure != "" {
		r.span.SetStatus(codes.Error, failure)
		r.span.SetAttributes(attribute.String("error.type", "agent_failed"))
	}
	r.span.End(trace.WithTimestamp(at))
	delete(o.runs, stream)
	o.t.removeRun(stream, r)
}

// failedAll ends the runs still open: the runtime closes their streams
// with ERROR and END, which the tap does not see.
func (o *agentObserver) failedAll(ev *event) {
	for id, r := range o.runs {
		r.span.AddEvent("agent_failed", trace.WithTimestamp(ev.at), trace.WithAttributes(
			attribute.String("error.type", Cause(ev.err)), attribute.String("polyweave.failure", ev.err.Error())))
		o.end(id, r, ev.err.Error(), ev.at)
	}
	o.untraced = nil
}
