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

// chat is one model request being answered. Its span is started when
// the answer ends, with all its attributes at once, or earlier when an
// event (a retry, a cut-off call) is to be added to it.
type chat struct {
	parent context.Context // of the run the request belongs to
	model  string
	start  time.Time
	span   trace.Span // nil until started (always without tracing)
	status string     // the error status description, if it failed
	// attrs are the attributes not on the span yet; buf holds them.
	attrs []attribute.KeyValue
	buf   [8]attribute.KeyValue
	// queued are requests of the stream completed while this one is
	// answered.
	queued []*chat
}

// modelObserver is the tap of one incarnation of a model adapter.
type modelObserver struct {
	t        *Telemetry
	provider string
	self     string            // id of the adapter's actor, once seen
	models   map[string]string // stream → model of the request being written
	open     map[string]*chat  // stream → request being answered
}

func (o *modelObserver) in(c actors.Context, f *messages.Frame) {
	switch {
	case f.GetType() == messages.FrameType_PARAM && f.GetName() == models.ParamModel:
		ev := frameEvent(evIn, o, f)
		o.t.rec.put(&ev)
	case f.GetType() == messages.FrameType_END:
		ev := frameEvent(evIn, o, f)
		if o.self == "" {
			o.self = c.Self().String()
		}
		ev.actor = o.self
		o.t.rec.put(&ev)
	}
}

func (o *modelObserver) out(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_META, messages.FrameType_ERROR, messages.FrameType_END:
		ev := frameEvent(evOut, o, f)
		o.t.rec.put(&ev)
	}
}

func (o *modelObserver) failed(_ actors.Context, err error) {
	o.t.rec.put(&event{kind: evFailed, to: o, at: time.Now(), err: err})
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
		ch.parent = o.t.runContext(id, ev.actor)
		ch.attrs = append(ch.buf[:0], opChat, attribute.String("gen_ai.provider.name", o.provider), attribute.String("gen_ai.request.model", model))
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

// started returns the span of ch, started now with the attributes known
// so far if it was not.
func (o *modelObserver) started(ch *chat) trace.Span {
	if ch.span == nil {
		_, ch.span = o.t.tracer.Start(ch.parent, o.t.spanName("chat", ch.model),
			trace.WithTimestamp(ch.start), clientKind, trace.WithAttributes(ch.attrs...))
		ch.attrs = ch.attrs[:0]
	}
	return ch.span
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
		if o.t.tracing {
			ch.status = ev.text
			ch.attrs = append(ch.attrs, attribute.String("error.type", "model_error"))
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
		if o.t.tracing {
			ch.attrs = append(ch.attrs, attribute.Int64("gen_ai.usage.input_tokens", u.Prompt), attribute.Int64("gen_ai.usage.output_tokens", u.Completion))
			if u.Details.Cached > 0 {
				ch.attrs = append(ch.attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.Details.Cached))
			}
		}
		if o.t.metering {
			o.t.tokens.Record(context.Background(), u.Prompt, metric.WithAttributes(o.attrs(ch, attribute.String("gen_ai.token.type", "input"))...))
			o.t.tokens.Record(context.Background(), u.Completion, metric.WithAttributes(o.attrs(ch, attribute.String("gen_ai.token.type", "output"))...))
		}
	case models.MetaFinish:
		if o.t.tracing {
			if kv, ok := o.t.finishReason(ev.payload); ok {
				ch.attrs = append(ch.attrs, kv)
			}
		}
	case models.MetaTruncatedCall:
		if o.t.tracing {
			o.started(ch).AddEvent("truncated_call", trace.WithTimestamp(ev.at), trace.WithAttributes(attribute.String("gen_ai.tool.call.id", ev.callID)))
		}
	case resilience.MetaEvent:
		if o.t.tracing {
			var rev resilience.Event
			if json.Unmarshal(ev.payload, &rev) == nil {
				o.started(ch).AddEvent("model_call."+rev.Kind, trace.WithTimestamp(ev.at), trace.WithAttributes(
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
	return append([]attribute.KeyValue{opChat,
		attribute.String("gen_ai.provider.name", o.provider), attribute.String("gen_ai.request.model", ch.model)}, extra...)
}

// finish ends one request: its span (started now, with all its
// attributes, if nothing needed it before) and its duration.
func (o *modelObserver) finish(ch *chat, at time.Time) {
	if o.t.tracing {
		if ch.span == nil {
			o.started(ch)
		} else if len(ch.attrs) > 0 {
			ch.span.SetAttributes(ch.attrs...)
		}
		if ch.status != "" {
			ch.span.SetStatus(codes.Error, ch.status)
		}
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
			if o.t.tracing {
				c.status = ev.err.Error()
				c.attrs = append(c.attrs, attribute.String("error.type", "model_failed"))
			}
			o.finish(c, ev.at)
		}
		delete(o.open, id)
	}
}
