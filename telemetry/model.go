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
	// What the answer said, for the span's attributes.
	usage                 bool
	input, output, cached int64
	finish                attribute.KeyValue // gen_ai.response.finish_reasons; empty when none
	errorType, status     string             // set when the request failed
	// queued are requests of the stream completed while this one is
	// answered.
	queued []*chat
}

// modelObserver is the tap of one incarnation of a model adapter.
type modelObserver struct {
	listed
	t        *Telemetry
	provider string
	self     string            // id of the adapter's actor, once seen
	models   map[string]string // stream → model of the request being written
	// lastParam is the payload (JSON) of the last model parameter
	// decoded, lastModel its value: requests name the same model again
	// and again.
	lastParam, lastModel string
	open                 map[string]*chat // stream → request being answered
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
	case messages.FrameType_META:
		switch f.GetName() {
		case models.MetaUsage, models.MetaFinish, models.MetaTruncatedCall, resilience.MetaEvent:
		default:
			return // not recorded (thinking blocks)
		}
	case messages.FrameType_ERROR, messages.FrameType_END:
	default:
		return
	}
	ev := frameEvent(evOut, o, f)
	o.t.rec.put(&ev)
}

func (o *modelObserver) failed(_ actors.Context, err error) {
	o.t.rec.put(&event{kind: evFailed, to: o, at: time.Now(), err: err})
}

func (o *modelObserver) resumed(a actors.ResumeAnswered, err error) {
	o.t.rec.put(resumedEvent(o, a, err))
}

func (o *modelObserver) handle(ev *event) {
	switch ev.kind {
	case evIn:
		o.request(ev)
	case evOut:
		o.answer(ev)
	case evResumed:
		o.resumedStream(ev)
	case evFailed:
		o.failedAll(ev)
	}
}

func (o *modelObserver) request(ev *event) {
	id := ev.stream
	if ev.ftype == messages.FrameType_PARAM {
		if o.lastParam == "" || string(ev.payload) != o.lastParam { // a comparison that allocates nothing
			var m string
			if json.Unmarshal(ev.payload, &m) != nil {
				return
			}
			o.lastParam, o.lastModel = string(ev.payload), m
		}
		if o.models == nil {
			o.models = map[string]string{}
		}
		o.models[id] = o.lastModel
		return
	}
	model := o.models[id]
	delete(o.models, id)
	ch := o.t.spareChats.get()
	ch.model, ch.start = model, ev.at
	if o.t.tracing {
		ch.parent = o.t.runContext(id, ev.actor)
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

// started returns the span of ch, started now if it was not.
func (o *modelObserver) started(ch *chat) trace.Span {
	if ch.span == nil {
		_, ch.span = o.t.startSpan(ch.parent, o.t.spanName("chat", ch.model), ch.start, clientKind, o.chatAttrs(ch, false))
	}
	return ch.span
}

// chatAttrs returns the attributes of ch's span: those known when the
// request is sent, and with answer those of its answer. The slice is
// the Telemetry's scratch, valid until the next call.
func (o *modelObserver) chatAttrs(ch *chat, answer bool) []attribute.KeyValue {
	a := append(o.t.scratch[:0], opChat, attribute.String("gen_ai.provider.name", o.provider), attribute.String("gen_ai.request.model", ch.model))
	if !answer {
		o.t.scratch = a
		return a
	}
	if ch.usage {
		a = append(a, attribute.Int64("gen_ai.usage.input_tokens", ch.input), attribute.Int64("gen_ai.usage.output_tokens", ch.output))
		if ch.cached > 0 {
			a = append(a, attribute.Int64("gen_ai.usage.cache_read.input_tokens", ch.cached))
		}
	}
	if ch.finish.Key != "" {
		a = append(a, ch.finish)
	}
	if ch.errorType != "" {
		a = append(a, attribute.String("error.type", ch.errorType))
	}
	o.t.scratch = a
	return a
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
		ch.status, ch.errorType = clipText(ev.text), "model_error"
	case messages.FrameType_END:
		o.finish(ch, false, ev.at)
		if len(ch.queued) > 0 {
			next := ch.queued[0]
			next.queued = ch.queued[1:]
			o.open[id] = next
		} else {
			delete(o.open, id)
		}
		o.t.spareChats.put(ch, chat{}) // its queue, now the next request's, is dropped
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
		ch.usage, ch.input, ch.output, ch.cached = true, u.Prompt, u.Completion, u.Details.Cached
		if o.t.metering {
			o.t.tokens.Record(context.Background(), u.Prompt, metric.WithAttributes(o.attrs(ch, attribute.String("gen_ai.token.type", "input"))...))
			o.t.tokens.Record(context.Background(), u.Completion, metric.WithAttributes(o.attrs(ch, attribute.String("gen_ai.token.type", "output"))...))
		}
	case models.MetaFinish:
		if o.t.tracing {
			if kv, ok := o.t.finishReason(ev.payload); ok {
				ch.finish = kv
			}
		}
	case models.MetaTruncatedCall:
		if o.t.tracing {
			o.started(ch).AddEvent("truncated_call", trace.WithTimestamp(ev.at), trace.WithAttributes(attribute.String("gen_ai.tool.call.id", clipText(ev.callID))))
		}
	case resilience.MetaEvent:
		if o.t.tracing {
			var rev resilience.Event
			if json.Unmarshal(ev.payload, &rev) == nil {
				o.started(ch).AddEvent("model_call."+rev.Kind, trace.WithTimestamp(ev.at), trace.WithAttributes(
					attribute.Int("polyweave.model_call.attempt", rev.Attempt),
					attribute.Int("http.response.status_code", rev.Status),
					attribute.String("error.type", clipText(rev.Error)),
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
// attributes, if nothing needed it before) and its duration. An
// abandoned request (events were dropped) is marked incomplete and has
// no duration recorded.
func (o *modelObserver) finish(ch *chat, abandoned bool, at time.Time) {
	if o.t.tracing {
		attrs := o.chatAttrs(ch, true)
		if abandoned {
			attrs = append(attrs, incomplete)
			o.t.scratch = attrs
		}
		if ch.span == nil {
			_, ch.span = o.t.startSpan(ch.parent, o.t.spanName("chat", ch.model), ch.start, clientKind, attrs)
		} else {
			ch.span.SetAttributes(attrs[3:]...)
		}
		if ch.status != "" {
			ch.span.SetStatus(codes.Error, ch.status)
		}
		o.t.endSpan(ch.span, at)
	}
	if o.t.metering && !abandoned {
		o.t.measure(at.Sub(ch.start).Seconds(), o.attrs(ch))
	}
}

// failedAll ends the requests still open: the runtime closes their
// streams with ERROR and END, which the tap does not see.
func (o *modelObserver) failedAll(ev *event) {
	for id := range o.open {
		o.failStream(id, failureText(ev.err), ev.at)
	}
	o.models = nil // the incarnation is over
}

// resumedStream ends, failed, the requests of a stream a Resume
// answered: the runtime closed it with ERROR and END, which the tap does
// not see, and drops what the adapter writes on it after. A call
// answered alone leaves the stream's requests to the calls that go on.
func (o *modelObserver) resumedStream(ev *event) {
	if ev.alone {
		return
	}
	o.failStream(ev.stream, failureText(ev.err), ev.at)
	delete(o.models, ev.stream)
}

// failStream ends the requests of stream being answered, failed.
func (o *modelObserver) failStream(stream, failure string, at time.Time) {
	ch, ok := o.open[stream]
	if !ok {
		return
	}
	for _, c := range append([]*chat{ch}, ch.queued...) {
		c.status, c.errorType = failure, "model_failed"
		o.finish(c, false, at)
	}
	delete(o.open, stream)
}

func (o *modelObserver) idle() bool { return len(o.open) == 0 && len(o.models) == 0 }

func (o *modelObserver) abandon(at time.Time) {
	for id := range o.open {
		o.abandonStream(id, true, at)
	}
	o.models = nil
}

// abandonStream ends the stream's requests being answered. The model of
// the request being written is kept when no frame written into the
// adapter was lost: that request lost nothing, its END is still to come.
func (o *modelObserver) abandonStream(stream string, in bool, at time.Time) {
	if ch, ok := o.open[stream]; ok {
		for _, c := range append([]*chat{ch}, ch.queued...) {
			o.finish(c, true, notBefore(at, c.start))
		}
		delete(o.open, stream)
	}
	if in {
		delete(o.models, stream)
	}
}
