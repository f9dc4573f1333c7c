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
	if t.rec == nil {
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
	models   map[string]string // stream → model of the request being written
	open     map[string]*chat  // stream → request being answered
}

func (o *modelObserver) in(c actors.Context, f *messages.Frame) {
	switch {
	case f.GetType() == messages.FrameType_PARAM && f.GetName() == models.ParamModel:
		o.t.rec.put(frameEvent(evIn, o, f))
	case f.GetType() == messages.FrameType_END:
		ev := frameEvent(evIn, o, f)
		ev.actor = c.Self().String()
		o.t.rec.put(ev)
	}
}

func (o *modelObserver) out(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_META, messages.FrameType_ERROR, messages.FrameType_END:
		o.t.rec.put(frameEvent(evOut, o, f))
	}
}

func (o *modelObserver) failed(_ actors.Context, err error) {
	o.t.rec.put(event{kind: evFailed, to: o, at: time.Now(), err: err})
}

func (o *modelObserver) handle(ev *event) {
	switch ev.kind {
	case evIn:
		o.request(ev)
	case evOut:
		o.answer(ev)
	case evFailed:
		o.failedAll(ev)
	}
}

func (o *modelObserver) request(ev *event) {
	id := ev.stream
	if ev.ftype == messages.FrameType_PARAM {
		var m string
		if json.Unmarshal(ev.payload, &m) == nil {
			if o.models == nil {
				o.models = map[string]string{}
			}
			o.models[id] = m
		}
		return
	}
	model := o.models[id]
	delete(o.models, id)
	ch := &chat{model: model, start: ev.at}
	if o.t.tracing {
		name := "chat"
		if model != "" {
			name += " " + model
		}
		_, ch.span = o.t.tracer.Start(o.t.runContext(id, ev.actor), name,
			trace.WithTimestamp(ev.at), trace.WithSpanKind(trace.SpanKindClient),
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

func (o *modelObserver) answer(ev *event) {
	id := ev.stream
	ch, ok := o.open[id]
	if !ok {
		return
	}
	switch ev.ftype {
	case messages.FrameType_META:
		o.meta(ch, ev)
	case messages.FrameType_ERROR:
		if ch.span != nil {
			ch.span.SetStatus(codes.Error, ev.text)
			ch.span.SetAttributes(attribute.String("error.type", "model_error"))
		}
	case messages.FrameType_END:
		o.finish(ch, ev.at)
		if len(ch.queued) > 0 {
			next := ch.queued[0]
			next.queued = ch.queued[1:]
			o.open[id] = next
		} else {
			delete(o.open, id)
		}
	}
}

func (o *modelObserver) meta(ch *chat, ev *event) {
	switch ev.name {
	case models.MetaUsage:
		var u struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
			Details    struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
		if json.Unmarshal(ev.payload, &u) != nil {
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
		if ch.span != nil && json.Unmarshal(ev.payload, &reason) == nil {
			ch.span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{reason}))
		}
	case models.MetaTruncatedCall:
		if ch.span != nil {
			ch.span.AddEvent("truncated_call", trace.WithAttributes(attribute.String("gen_ai.tool.call.id", ev.callID)))
		}
	case resilience.MetaEvent:
		if ch.span != nil {
			var rev resilience.Event
			if json.Unmarshal(ev.payload, &rev) == nil {
				ch.span.AddEvent("model_call."+rev.Kind, trace.WithTimestamp(ev.at), trace.WithAttributes(
					attribute.Int("polyweave.model_call.attempt", rev.Attempt),
					attribute.Int("http.response.status_code", rev.Status),
					attribute.String("error.type", rev.Error),
					attribute.Int64("polyweave.model_call.delay_ns", int64(rev.Delay)),
					attribute.Int64("polyweave.model_call.wait_ns", int64(rev.Wait)),
					attribute.Int("polyweave.model_call.in_flight", rev.InFlight)))
			}
		}
	}
}

func (o *modelObserver) attrs(ch *chat, extra ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", o.provider), attribute.String("gen_ai.request.model", ch.model)}, extra...)
}

// finish ends one request: its span and its duration.
func (o *modelObserver) finish(ch *chat, at time.Time) {
	if ch.span != nil {
		ch.span.End(trace.WithTimestamp(at))
	}
	if o.t.metering {
		o.t.duration.Record(context.Background(), at.Sub(ch.start).Seconds(), metric.WithAttributes(o.attrs(ch)...))
	}
}

// failed ends the requests still open: the runtime closes their streams
// with ERROR and END, which the tap does not see.
func (o *modelObserver) failedAll(ev *event) {
	for id, ch := range o.open {
		for _, c := range append([]*chat{ch}, ch.queued...) {
			if c.span != nil {
				c.span.SetStatus(codes.Error, ev.err.Error())
				c.span.SetAttributes(attribute.String("error.type", "model_failed"))
			}
			o.finish(c, ev.at)
		}
		delete(o.open, id)
	}
}
