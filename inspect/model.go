package inspect

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// maxText bounds the text of a response kept per session.
const maxText = 16 << 10

// Model returns spec (a model adapter) with its Logic decorated so that
// the inspector sees the conversations it serves: each request's messages,
// the response's text and tool calls as they come, errors, and which
// streams are open. The decoration runs inside the adapter's own actor (no
// extra hop) and passes every frame and message on unchanged; with
// Options.Faults it can also cut a stream ("cut a model stream": the
// stream ends with ERROR and END as if the model's connection broke, and
// the rest of the adapter's answer on it is dropped).
func (in *Inspector) Model(spec actors.Spec) actors.Spec {
	in.mu.Lock()
	in.models[spec.Name] = true
	in.mu.Unlock()
	newLogic := spec.New
	spec.New = func() actors.Logic {
		return &modelLogic{inner: newLogic(), obs: &modelObserver{in: in}}
	}
	return spec
}

// cutStream asks a decorated adapter to cut a stream.
type cutStream struct{ stream string }

// modelObserver is the inspector's side of one incarnation of a
// decorated adapter. Its fields are the actor's: no lock.
type modelObserver struct {
	in   *Inspector
	self actors.Ref
	cut  map[string]bool // streams cut, until the adapter's own END
}

type modelLogic struct {
	inner actors.Logic
	obs   *modelObserver
	ctx   modelContext // reused: the Context of the current turn
}

// context is the Context inner gets in this turn (no allocation).
func (m *modelLogic) context(c actors.Context) *modelContext {
	m.ctx.Context, m.ctx.obs = c, m.obs
	return &m.ctx
}

// Receive implements actors.Logic.
func (m *modelLogic) Receive(c actors.Context, msg any) {
	switch v := msg.(type) {
	case actors.Started:
		m.obs.start(c.Self())
	case *messages.Frame:
		m.obs.request(v)
	case *cutStream:
		m.obs.cutStream(c, v.stream)
		return
	}
	m.inner.Receive(m.context(c), msg)
}

// ReceiveChildFrame implements actors.ChildFrameReceiver for an adapter
// that has children.
func (m *modelLogic) ReceiveChildFrame(c actors.Context, child actors.Ref, f *messages.Frame) {
	ctx := m.context(c)
	if r, ok := m.inner.(actors.ChildFrameReceiver); ok {
		r.ReceiveChildFrame(ctx, child, f)
		return
	}
	m.inner.Receive(ctx, actors.ChildFrame{Child: child, Frame: f})
}

// OnFailure implements actors.FailureHandler: the adapter answers for its
// open work as it would alone.
func (m *modelLogic) OnFailure(c actors.Context, err error) {
	if h, ok := m.inner.(actors.FailureHandler); ok {
		h.OnFailure(m.context(c), err)
	}
	m.obs.stop(err)
}

// modelContext sees what the adapter emits.
type modelContext struct {
	actors.Context
	obs *modelObserver
}

// Emit implements actors.Context.
func (c *modelContext) Emit(f *messages.Frame) {
	if c.obs.response(f) {
		c.Context.Emit(f)
	}
}

// Persister lets actors.PersisterOf see through the decoration.
func (c *modelContext) Persister() (actors.Persister, bool) { return actors.PersisterOf(c.Context) }

func (o *modelObserver) start(self actors.Ref) {
	o.self = self
	o.in.mu.Lock()
	o.in.modelsBy[self.String()] = o
	o.in.mu.Unlock()
}

// stop forgets the incarnation: its open streams were closed.
func (o *modelObserver) stop(err error) {
	in := o.in
	in.mu.Lock()
	if in.modelsBy[o.self.String()] == o {
		delete(in.modelsBy, o.self.String())
	}
	for _, s := range in.sessions {
		for stream, st := range s.streams {
			if st.model == o {
				delete(s.streams, stream)
				s.lastError = "the model adapter stopped: " + err.Error()
			}
		}
	}
	in.mu.Unlock()
	in.changed()
}

// session returns the session of stream, making it; in.mu must be held.
func (o *modelObserver) session(stream string) *session { return o.in.session(stream) }

// session returns the session of stream, making it; in.mu must be held.
func (in *Inspector) session(stream string) *session {
	key := sessionKey(stream)
	s := in.sessions[key]
	if s == nil {
		now := time.Now()
		s = &session{id: key, started: now, updated: now, streams: map[string]openStream{}}
		in.sessions[key] = s
		in.sessionOrder = append(in.sessionOrder, key)
		in.forget()
	}
	return s
}

// request sees a frame written into the adapter.
func (o *modelObserver) request(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_PARAM:
		if f.GetName() != models.ParamMessages {
			return
		}
	case messages.FrameType_END, messages.FrameType_CANCEL, messages.FrameType_ABORT:
	default:
		return
	}
	in := o.in
	var now time.Time
	if f.GetType() == messages.FrameType_END {
		now = time.Now() // only where it is shown: clocks cost in VMs
	}
	in.mu.Lock()
	s := o.session(f.GetStreamId())
	switch f.GetType() {
	case messages.FrameType_PARAM:
		s.messages = f.GetPayload()
		s.text.Reset()
		s.answer = ""
		s.calls = s.calls[:0] // the follow-up carries their results
	case messages.FrameType_END:
		s.requests++
		s.updated = now
		s.streams[f.GetStreamId()] = openStream{model: o, since: now}
	default:
		s.lastError = fmt.Sprintf("%s sent on %s", f.GetType(), f.GetStreamId())
	}
	in.mu.Unlock()
	in.changed()
}

// response sees a frame the adapter emits and reports whether to pass it
// on (not when its stream was cut).
func (o *modelObserver) response(f *messages.Frame) bool {
	stream := f.GetStreamId()
	if o.cut != nil && o.cut[stream] {
		if f.GetType() == messages.FrameType_END {
			delete(o.cut, stream)
		}
		return false
	}
	switch f.GetType() {
	case messages.FrameType_TEXT, messages.FrameType_TOOL_CALL, messages.FrameType_ERROR, messages.FrameType_END:
	default:
		return true // META and the rest: nothing the page shows
	}
	in := o.in
	var now time.Time
	if f.GetType() != messages.FrameType_TEXT {
		now = time.Now()
	}
	in.mu.Lock()
	s := o.session(stream)
	if !now.IsZero() {
		s.updated = now
	}
	switch f.GetType() {
	case messages.FrameType_TEXT:
		if f.IsToolArgChunk() {
			if p := s.call(f.GetToolCallId()); p != nil && len(p.args) < in.opts.Clip*2 {
				p.args = append(p.args, f.GetText()...)
			}
		} else if s.text.Len() < maxText {
			s.text.WriteString(f.GetText())
		}
	case messages.FrameType_TOOL_CALL:
		if p := s.call(f.GetToolCallId()); p != nil {
			p.args = slices.Clip(f.GetPayload()) // complete now; clipped: appending never writes into the frame
		} else {
			s.calls = append(s.calls, pendingCall{id: f.GetToolCallId(), name: f.GetName(), stream: stream,
				args: slices.Clip(f.GetPayload()), since: now})
		}
	case messages.FrameType_ERROR:
		s.lastError = f.GetText()
		s.errors++
		in.addFeed(FeedItem{Time: now, Kind: "model", Actor: o.self.String(), Alert: true,
			Text: fmt.Sprintf("model stream %s failed: %s", stream, f.GetText())})
	case messages.FrameType_END:
		delete(s.streams, stream)
		if len(s.calls) == 0 {
			s.answer = s.text.String() // a final answer
		}
		for i := range s.calls {
			if s.calls[i].dispatched.IsZero() {
				s.calls[i].dispatched = now // the loop runs the response's calls at its END
			}
		}
	}
	in.mu.Unlock()
	in.changed()
	return true
}

// cutStream ends stream outward with ERROR and END, as a broken model
// connection would, and drops the adapter's later frames of it.
func (o *modelObserver) cutStream(c actors.Context, stream string) {
	in := o.in
	in.mu.Lock()
	s := in.sessions[sessionKey(stream)]
	open := false
	if s != nil {
		st, ok := s.streams[stream]
		open = ok && st.model == o
	}
	in.mu.Unlock()
	if !open {
		return
	}
	f := messages.Error(stream, "model stream cut by the inspector")
	o.response(f)
	c.Emit(f)
	end := messages.End(stream)
	o.response(end)
	c.Emit(end)
	if o.cut == nil {
		o.cut = map[string]bool{}
	}
	o.cut[stream] = true
}

// session is what the inspector knows of one conversation.
type session struct {
	id               string
	started, updated time.Time
	messages         json.RawMessage // the last request's messages
	text             strings.Builder // the current response's text
	answer           string          // the final answer, once given
	calls            []pendingCall   // tool calls of the current response without a result yet
	approvals        []heldApproval  // calls waiting for a person, held first first
	streams          map[string]openStream
	requests, errors int
	lastError        string
}

type openStream struct {
	model *modelObserver
	since time.Time
}

type pendingCall struct {
	id, name, stream string
	args             []byte    // kept as the frame has them; clipped when shown
	since            time.Time // when the model made it
	dispatched       time.Time // when its response ended (the loop runs it)
}

// call returns the pending call id, valid until calls changes.
func (s *session) call(id string) *pendingCall {
	for i := range s.calls {
		if s.calls[i].id == id {
			return &s.calls[i]
		}
	}
	return nil
}

func (s *session) removeCall(id string) (pendingCall, bool) {
	for i, p := range s.calls {
		if p.id == id {
			s.calls = append(s.calls[:i], s.calls[i+1:]...)
			return p, true
		}
	}
	return pendingCall{}, false
}
