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
	if !t.tracing && !t.metering {
		return inner
	}
	return tap(inner, func() observer { return &agentObserver{t: t} })
}

type run struct {
	live  liveRun
	tools map[string]*toolSpan
}

type toolStart struct {
	name string
	at   time.Time
}

type toolSpan struct {
	span  trace.Span
	name  string
	start time.Time
}

// agentObserver is the tap of one incarnation of an agent.
type agentObserver struct {
	t    *Telemetry
	runs map[string]*run // by stream id
	// last caches the run of the most recent frame.
	last     *run
	lastID   string
	untraced map[string]toolStart // with metrics only: stream and tool call id → call
}

func (o *agentObserver) lookup(stream string) *run {
	if o.last != nil && o.lastID == stream {
		return o.last
	}
	r := o.runs[stream]
	if r != nil {
		o.last, o.lastID = r, stream
	}
	return r
}

func (o *agentObserver) in(c actors.Context, f *messages.Frame) {
	if !o.t.tracing {
		return
	}
	switch f.GetType() {
	case messages.FrameType_CANCEL, messages.FrameType_ABORT, messages.FrameType_TOOL_RESULT, messages.FrameType_END:
		return
	}
	id := f.GetStreamId()
	if o.lookup(id) != nil {
		return
	}
	ctx, span := o.t.tracer.Start(context.Background(), "invoke_agent "+o.t.agentName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", o.t.agentName),
			attribute.String("gen_ai.conversation.id", id)))
	r := &run{live: liveRun{ctx: ctx, span: span, actor: c.Self().String()}, tools: map[string]*toolSpan{}}
	if o.runs == nil {
		o.runs = map[string]*run{}
	}
	o.runs[id] = r
	o.last, o.lastID = r, id
	o.t.addRun(id, &r.live)
}

func (o *agentObserver) out(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR, messages.FrameType_END:
	default:
		return
	}
	if !o.t.tracing {
		if o.t.metering {
			o.untracedOut(f)
		}
		return
	}
	r := o.lookup(f.GetStreamId())
	if r == nil {
		return
	}
	switch f.GetType() {
	case messages.FrameType_TOOL_CALL:
		if _, dup := r.tools[f.GetToolCallId()]; dup {
			return
		}
		_, span := o.t.tracer.Start(r.live.ctx, "execute_tool "+f.GetName(), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", f.GetName()),
				attribute.String("gen_ai.tool.call.id", f.GetToolCallId())))
		r.tools[f.GetToolCallId()] = &toolSpan{span: span, name: f.GetName(), start: time.Now()}
	case messages.FrameType_TOOL_RESULT:
		ts, ok := r.tools[f.GetToolCallId()]
		if !ok {
			return
		}
		delete(r.tools, f.GetToolCallId())
		outcome, kind := toolOutcome(f)
		if kind != "" {
			ts.span.SetStatus(codes.Error, string(f.GetPayload()))
			ts.span.SetAttributes(attribute.String("error.type", kind))
		}
		ts.span.SetAttributes(attribute.String("polyweave.tool.outcome", outcome))
		ts.span.End()
		o.t.recordTool(ts.name, outcome, kind, time.Since(ts.start))
	case messages.FrameType_ERROR:
		r.live.span.SetStatus(codes.Error, f.GetText())
		r.live.span.SetAttributes(attribute.String("error.type", "run_error"))
	case messages.FrameType_END:
		o.end(f.GetStreamId(), r, "")
	}
}

// untracedOut keeps the tool-call metrics when only metrics are on.
func (o *agentObserver) untracedOut(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_TOOL_CALL:
		if o.untraced == nil {
			o.untraced = map[string]toolStart{}
		}
		o.untraced[f.GetStreamId()+"\x00"+f.GetToolCallId()] = toolStart{name: f.GetName(), at: time.Now()}
	case messages.FrameType_TOOL_RESULT:
		key := f.GetStreamId() + "\x00" + f.GetToolCallId()
		if call, ok := o.untraced[key]; ok {
			delete(o.untraced, key)
			outcome, kind := toolOutcome(f)
			o.t.recordTool(call.name, outcome, kind, time.Since(call.at))
		}
	}
}

// toolOutcome is "ok", or "error" with the failure kind of a failed result.
func toolOutcome(f *messages.Frame) (outcome, kind string) {
	if !f.IsErrorResult() {
		return "ok", ""
	}
	kind = f.GetMeta().GetFailureKind()
	if kind == "" {
		kind = "error"
	}
	return "error", kind
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
func (o *agentObserver) end(stream string, r *run, failure string) {
	for id, ts := range r.tools { // a call without a result: the run ended under it
		ts.span.SetStatus(codes.Error, "no result")
		ts.span.End()
		delete(r.tools, id)
	}
	if failure != "" {
		r.live.span.SetStatus(codes.Error, failure)
		r.live.span.SetAttributes(attribute.String("error.type", "agent_failed"))
	}
	r.live.span.End()
	delete(o.runs, stream)
	if o.last == r {
		o.last, o.lastID = nil, ""
	}
	o.t.removeRun(stream, &r.live)
}

// failed ends the runs still open: the runtime closes their streams with
// ERROR and END, which the tap does not see.
func (o *agentObserver) failed(_ actors.Context, err error) {
	for id, r := range o.runs {
		r.live.span.AddEvent("agent_failed", trace.WithAttributes(attribute.String("error.type", Cause(err)),
			attribute.String("polyweave.failure", err.Error())))
		o.end(id, r, err.Error())
	}
	o.untraced = nil
}
