package telemetry

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/polyweave/polyweave-go/telemetry"

// Options configure [New]. A nil *Options or a nil field means the
// default: a no-op provider.
type Options struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// AgentName is gen_ai.agent.name of the run spans; default "agent".
	AgentName string
}

// Telemetry records the spans and metrics of the duplexes it wraps. It is
// safe for concurrent use.
type Telemetry struct {
	tracer    trace.Tracer
	duration  metric.Float64Histogram
	tokens    metric.Int64Histogram
	agentName string

	mu   sync.Mutex
	runs map[string]context.Context // stream id → context of its run span
}

// New makes a Telemetry.
func New(opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = tracenoop.NewTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = metricnoop.NewMeterProvider()
	}
	if o.AgentName == "" {
		o.AgentName = "agent"
	}
	meter := o.MeterProvider.Meter(ScopeName)
	t := &Telemetry{tracer: o.TracerProvider.Tracer(ScopeName), agentName: o.AgentName, runs: map[string]context.Context{}}
	var err error
	if t.duration, err = meter.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of model requests and tool calls")); err != nil {
		return nil, err
	}
	if t.tokens, err = meter.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used per model request")); err != nil {
		return nil, err
	}
	return t, nil
}

// runContext returns the context of the run of stream (the background
// when the stream is not a traced run).
func (t *Telemetry) runContext(stream string) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ctx, ok := t.runs[stream]; ok {
		return ctx
	}
	return context.Background()
}

// Agent wraps the outermost stage of an agent (see the package doc).
func (t *Telemetry) Agent(inner actors.Spec) actors.Spec {
	spec := actors.Wrap(inner.Name+"-traced", inner, func() actors.Wrapped {
		return &agentHooks{t: t, runs: map[string]*run{}}
	})
	spec.Supervision = inner.Supervision
	return spec
}

type run struct {
	ctx   context.Context
	span  trace.Span
	tools map[string]*toolSpan
}

type toolSpan struct {
	span  trace.Span
	name  string
	start time.Time
}

type agentHooks struct {
	t    *Telemetry
	runs map[string]*run
}

func (h *agentHooks) Request(c actors.WrapperContext, f *messages.Frame) {
	id := f.GetStreamId()
	if _, ok := h.runs[id]; !ok && f.GetType() != messages.FrameType_CANCEL && f.GetType() != messages.FrameType_ABORT {
		ctx, span := h.t.tracer.Start(context.Background(), "invoke_agent "+h.t.agentName, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"),
				attribute.String("gen_ai.agent.name", h.t.agentName),
				attribute.String("gen_ai.conversation.id", id)))
		h.runs[id] = &run{ctx: ctx, span: span, tools: map[string]*toolSpan{}}
		h.t.mu.Lock()
		h.t.runs[id] = ctx
		h.t.mu.Unlock()
	}
	c.ToInner(f)
}

func (h *agentHooks) Response(c actors.WrapperContext, f *messages.Frame) {
	r, ok := h.runs[f.GetStreamId()]
	if ok {
		switch f.GetType() {
		case messages.FrameType_TOOL_CALL:
			_, span := h.t.tracer.Start(r.ctx, "execute_tool "+f.GetName(), trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"),
					attribute.String("gen_ai.tool.name", f.GetName()),
					attribute.String("gen_ai.tool.call.id", f.GetToolCallId())))
			r.tools[f.GetToolCallId()] = &toolSpan{span: span, name: f.GetName(), start: time.Now()}
		case messages.FrameType_TOOL_RESULT:
			if ts, ok := r.tools[f.GetToolCallId()]; ok {
				delete(r.tools, f.GetToolCallId())
				outcome := "ok"
				attrs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", ts.name)}
				if f.IsErrorResult() {
					outcome = "error"
					kind := f.GetMeta().GetFailureKind()
					if kind == "" {
						kind = "error"
					}
					ts.span.SetStatus(codes.Error, string(f.GetPayload()))
					ts.span.SetAttributes(attribute.String("error.type", kind))
					attrs = append(attrs, attribute.String("error.type", kind))
				}
				ts.span.SetAttributes(attribute.String("polyweave.tool.outcome", outcome))
				ts.span.End()
				attrs = append(attrs, attribute.String("polyweave.tool.outcome", outcome))
				h.t.duration.Record(context.Background(), time.Since(ts.start).Seconds(), metric.WithAttributes(attrs...))
			}
		case messages.FrameType_ERROR:
			r.span.SetStatus(codes.Error, f.GetText())
			r.span.SetAttributes(attribute.String("error.type", "model_error"))
		case messages.FrameType_END:
			for id, ts := range r.tools { // a call without a result: the run ended under it
				ts.span.SetStatus(codes.Error, "no result")
				ts.span.End()
				delete(r.tools, id)
			}
			r.span.End()
			delete(h.runs, f.GetStreamId())
			h.t.mu.Lock()
			delete(h.t.runs, f.GetStreamId())
			h.t.mu.Unlock()
		}
	}
	c.ToOuter(f)
}

// Model wraps a model adapter (see the package doc); provider is
// gen_ai.provider.name ("openai", "anthropic", ...).
func (t *Telemetry) Model(inner actors.Spec, provider string) actors.Spec {
	spec := actors.Wrap(inner.Name+"-traced", inner, func() actors.Wrapped {
		return &modelHooks{t: t, provider: provider, open: map[string]*chat{}}
	})
	spec.Supervision = inner.Supervision
	return spec
}

type chat struct {
	model string
	span  trace.Span
	start time.Time
	// queued are requests of the stream ended while this one is answered.
	queued []*chat
}

type modelHooks struct {
	t        *Telemetry
	provider string
	models   map[string]string // stream → model of the request being sent
	open     map[string]*chat  // stream → request being answered
}

func (h *modelHooks) Request(c actors.WrapperContext, f *messages.Frame) {
	id := f.GetStreamId()
	switch f.GetType() {
	case messages.FrameType_PARAM:
		if f.GetName() == models.ParamModel {
			var m string
			if json.Unmarshal(f.GetPayload(), &m) == nil {
				if h.models == nil {
					h.models = map[string]string{}
				}
				h.models[id] = m
			}
		}
	case messages.FrameType_END:
		model := h.models[id]
		delete(h.models, id)
		name := "chat"
		if model != "" {
			name += " " + model
		}
		_, span := h.t.tracer.Start(h.t.runContext(id), name, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
				attribute.String("gen_ai.provider.name", h.provider),
				attribute.String("gen_ai.request.model", model)))
		ch := &chat{model: model, span: span, start: time.Now()}
		if cur, ok := h.open[id]; ok {
			cur.queued = append(cur.queued, ch)
		} else {
			h.open[id] = ch
		}
	}
	c.ToInner(f)
}

func (h *modelHooks) Response(c actors.WrapperContext, f *messages.Frame) {
	id := f.GetStreamId()
	if ch, ok := h.open[id]; ok {
		switch f.GetType() {
		case messages.FrameType_META:
			switch f.GetName() {
			case models.MetaUsage:
				var u struct {
					Prompt     int64 `json:"prompt_tokens"`
					Completion int64 `json:"completion_tokens"`
				}
				if json.Unmarshal(f.GetPayload(), &u) == nil {
					ch.span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", u.Prompt), attribute.Int64("gen_ai.usage.output_tokens", u.Completion))
					base := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", h.provider), attribute.String("gen_ai.request.model", ch.model)}
					h.t.tokens.Record(context.Background(), u.Prompt, metric.WithAttributes(append(base, attribute.String("gen_ai.token.type", "input"))...))
					h.t.tokens.Record(context.Background(), u.Completion, metric.WithAttributes(append(base, attribute.String("gen_ai.token.type", "output"))...))
				}
			case models.MetaFinish:
				var reason string
				if json.Unmarshal(f.GetPayload(), &reason) == nil {
					ch.span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{reason}))
				}
			case "model_call": // resilience.MetaEvent
				ch.span.AddEvent("model_call", trace.WithAttributes(attribute.String("polyweave.event", string(f.GetPayload()))))
			}
		case messages.FrameType_ERROR:
			ch.span.SetStatus(codes.Error, f.GetText())
			ch.span.SetAttributes(attribute.String("error.type", "model_error"))
		case messages.FrameType_END:
			ch.span.End()
			attrs := metric.WithAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", h.provider), attribute.String("gen_ai.request.model", ch.model))
			h.t.duration.Record(context.Background(), time.Since(ch.start).Seconds(), attrs)
			if len(ch.queued) > 0 {
				next := ch.queued[0]
				next.queued = ch.queued[1:]
				h.open[id] = next
			} else {
				delete(h.open, id)
			}
		}
	}
	c.ToOuter(f)
}
