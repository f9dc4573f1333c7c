package telemetry

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// Model taps a model adapter (see the package doc); provider is
// gen_ai.provider.name ("openai", "anthropic", ...). The spec keeps its
// name and supervision: no actor is added. With neither tracing nor
// metrics on, it returns inner unchanged.
func (t *Telemetry) Model(inner actors.Spec, provider string) actors.Spec {
	if !t.tracing && !t.metering {
		return inner
	}
	return tap(inner, func() observer { return &modelObserver{t: t, provider: provider} })
}

// chat is one model request being answered.
type chat struct {
	model string
	span  trace.Span // nil without tracing
	start time.Time
	// queued are requests of the stream completed while this one is
	// answered.
	queued []*chat
}

// modelObserver is the tap of one incarnation of a model adapter.
type modelObserver struct {
	t        *Telemetry
	provider string
	self     string            // the adapter's actor id, once known
	models   map[string]string // stream → model of the request being written
	open     map[string]*chat  // stream → request being answered
}

func (o *modelObserver) in(c actors.Context, f *messages.Frame) {
	if !o.t.tracing && !o.t.metering {
		return
	}
	id := f.GetStreamId()
	switch f.GetType() {
	case messages.FrameType_PARAM:
		if f.GetName() == models.ParamModel {
			var m string
			if json.Unmarshal(f.GetPayload(), &m) == nil {
				if o.models == nil {
					o.models = map[string]string{}
				}
				o.models[id] = m
			}
		}
	case messages.FrameType_END:
		model := o.models[id]
		delete(o.models, id)
		ch := &chat{model: model, start: time.Now()}
		if o.t.tracing {
			if o.self == "" {
				o.self = c.Self().String()
			}
			name := "chat"
			if model != "" {
				name += " " + model
			}
			_, ch.span = o.t.tracer.Start(o.t.runContext(id, o.self), name, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
					attribute.String("gen_ai.provider.name", o.provider),
					attribute.String("gen_ai.request.model", model)))
		}
		if o.open == nil {
			o.open = map[string]*chat{}
		}
		if cur, ok := o.open[id]; ok {
			cur.queued = append(cur.queued, ch)
		} else {
			o.open[id] = ch
		}
	}
}

func (o *modelObserver) out(f *messages.Frame) {
	if !o.t.tracing && !o.t.metering {
		return
	}
	switch f.GetType() {
	case messages.FrameType_META, messages.FrameType_ERROR, messages.FrameType_END:
	default:
		return
	}
	id := f.GetStreamId()
	ch, ok := o.open[id]
	if !ok {
		return
	}
	switch f.GetType() {
	case messages.FrameType_META:
		o.meta(ch, f)
	case messages.FrameType_ERROR:
		if ch.span != nil {
			ch.span.SetStatus(codes.Error, f.GetText())
			ch.span.SetAttributes(attribute.String("error.type", "model_error"))
		}
	case messages.FrameType_END:
		o.finish(ch)
		if len(ch.queued) > 0 {
			next := ch.queued[0]
			next.queued = ch.queued[1:]
			o.open[id] = next
		} else {
			delete(o.open, id)
		}
	}
}

func (o *modelObserver) meta(ch *chat, f *messages.Frame) {
	switch f.GetName() {
	case models.MetaUsage:
		var u struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
			Details    struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
		if json.Unmarshal(f.GetPayload(), &u) != nil {
			return
		}
		if ch.span != nil {
			ch.span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", u.Prompt), attribute.Int64("gen_ai.usage.output_tokens", u.Completion))
			if u.Details.Cached > 0 {
				ch.span.SetAttributes(attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.Details.Cached))
			}
		}
		if o.t.metering {
			o.t.tokens.Record(context.Background(), u.Prompt, metric.WithAttributes(o.attrs(ch, attribute.String("gen_ai.token.type", "input"))...))
			o.t.tokens.Record(context.Background(), u.Completion, metric.WithAttributes(o.attrs(ch, attribute.String("gen_ai.token.type", "output"))...))
		}
	case models.MetaFinish:
		var reason string
		if ch.span != nil && json.Unmarshal(f.GetPayload(), &reason) == nil {
			ch.span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{reason}))
		}
	case models.MetaTruncatedCall:
		if ch.span != nil {
			ch.span.AddEvent("truncated_call", trace.WithAttributes(attribute.String("gen_ai.tool.call.id", f.GetToolCallId())))
		}
	case resilience.MetaEvent:
		if ch.span != nil {
			var ev resilience.Event
			if json.Unmarshal(f.GetPayload(), &ev) == nil {
				ch.span.AddEvent("model_call."+ev.Kind, trace.WithAttributes(
					attribute.Int("polyweave.model_call.attempt", ev.Attempt),
					attribute.Int("http.response.status_code", ev.Status),
					attribute.String("error.type", ev.Error),
					attribute.Int64("polyweave.model_call.delay_ns", int64(ev.Delay)),
					attribute.Int64("polyweave.model_call.wait_ns", int64(ev.Wait)),
					attribute.Int("polyweave.model_call.in_flight", ev.InFlight)))
			}
		}
	}
}

func (o *modelObserver) attrs(ch *chat, extra ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", o.provider), attribute.String("gen_ai.request.model", ch.model)}, extra...)
}

// finish ends one request: its span and its duration.
func (o *modelObserver) finish(ch *chat) {
	if ch.span != nil {
		ch.span.End()
	}
	if o.t.metering {
		o.t.duration.Record(context.Background(), time.Since(ch.start).Seconds(), metric.WithAttributes(o.attrs(ch)...))
	}
}

// failed ends the requests still open: the runtime closes their streams
// with ERROR and END, which the tap does not see.
func (o *modelObserver) failed(_ actors.Context, err error) {
	for id, ch := range o.open {
		for _, c := range append([]*chat{ch}, ch.queued...) {
			if c.span != nil {
				c.span.SetStatus(codes.Error, err.Error())
				c.span.SetAttributes(attribute.String("error.type", "model_failed"))
			}
			o.finish(c)
		}
		delete(o.open, id)
	}
}
