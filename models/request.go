package models

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/polyweave/polyweave-go/internal/onemap"
	"github.com/polyweave/polyweave-go/messages"
)

// Names of the META frames of a response.
const (
	// MetaUsage is the META frame carrying token counts as JSON.
	MetaUsage = "usage"
	// MetaFinish is the META frame carrying the finish reason as a JSON string.
	MetaFinish = "finish"
)

// Well-known PARAM names of a request.
const (
	ParamMessages   = "messages"
	ParamTools      = "tools"
	ParamToolChoice = "tool_choice"
	ParamModel      = "model"
)

// ErrCancelled is the reason a request stopped by CANCEL or ABORT ends
// with; its text is the text of the ERROR frame.
var ErrCancelled = errors.New("cancelled")

// Param is one PARAM frame of a request: a name and a raw JSON value.
type Param struct {
	Name  string
	Value json.RawMessage
}

// Request is one complete request to a model: the PARAM frames of a stream
// up to its END, in arrival order. Adapters use the pointer as the identity
// of the request (as the key of its background work and timers). A Request
// is not changed once complete; its values are the payloads of the frames
// it was built from and must not be modified.
type Request struct {
	StreamID string
	Params   []Param
}

// Param returns the value of the PARAM named name (the last one when it
// was sent more than once) and whether there was one.
func (r *Request) Param(name string) (json.RawMessage, bool) {
	for i := len(r.Params) - 1; i >= 0; i-- {
		if r.Params[i].Name == name {
			return r.Params[i].Value, true
		}
	}
	return nil, false
}

// Frames returns the request as the PARAM frames and END that make it.
func (r *Request) Frames() []*messages.Frame {
	out := make([]*messages.Frame, 0, len(r.Params)+1)
	for _, p := range r.Params {
		out = append(out, messages.RawParam(r.StreamID, p.Name, p.Value))
	}
	return append(out, messages.End(r.StreamID))
}

// Tracker keeps the requests of an adapter's streams apart: it gathers
// PARAM frames into [Request] values, queues a request completed while the
// previous one of its stream is still being answered, and carries out
// CANCEL and ABORT. The adapter starts the requests the tracker hands it,
// checks [Tracker.Live] before emitting anything for one, and calls
// [Tracker.Done] once it has emitted its END.
//
// The zero Tracker is ready. It is not safe for concurrent use: it lives
// inside one adapter Logic, and so goes with its incarnation (a restarted
// adapter starts with a new one).
type Tracker struct {
	// streams by id: an adapter mostly serves one stream at a time,
	// which onemap keeps out of its Go map.
	streams onemap.Map[streamRequests]
	spare   *streamRequests // of a stream forgotten, for the next one
	// spareRequest is a request given back by Release, for the next one.
	spareRequest *Request
	// cut holds the streams whose request a CANCEL answered before its
	// END: that END, if it comes, ends nothing.
	cut cutShort
}

// maxCutShort bounds the streams a tracker remembers as cancelled before
// their END. A client that abandons its request may never send that END,
// so the oldest is forgotten beyond it, and its END, should it still
// come, makes an empty request (answered with an error that the next
// request on the stream could read as its own) rather than being
// ignored. An END comes right after its PARAMs or never, so only a burst
// of more cancels than this, each before its END, between a CANCEL and
// the END it overtook, meets that. Remembering one costs a map entry and
// a slot of a ring (some 100 bytes with its id): a few hundred KiB at
// most, and only once so many clients abandoned their requests.
const maxCutShort = 4096

// cutShort is the set of streams cancelled before their END, bounded at
// maxCutShort, the oldest forgotten first. A stream is found, added and
// removed in constant time: each memory carries the generation of its
// cancel, so that the ring of memories in age order need not be searched
// when one goes early (a PARAM or the late END came): the ring's entry
// stays until its turn, and then forgets the stream only if no later
// cancel of the same id is remembered. The ring empties when the last
// memory goes (each entry is cleared once: constant time per cancel).
type cutShort struct {
	at   map[string]uint64 // stream id to the generation of its cancel
	ring []cutMemory       // oldest at next once full
	next int
	gen  uint64
}

type cutMemory struct {
	id  string
	gen uint64
}

// add remembers stream id as cancelled before its END.
func (c *cutShort) add(id string) {
	if c.at == nil {
		c.at = make(map[string]uint64)
	}
	c.gen++
	m := cutMemory{id: id, gen: c.gen}
	if len(c.ring) < maxCutShort {
		c.ring = append(c.ring, m)
	} else {
		if old := c.ring[c.next]; c.at[old.id] == old.gen {
			delete(c.at, old.id) // the oldest, still remembered: forgotten
		}
		c.ring[c.next] = m
		c.next = (c.next + 1) % maxCutShort
	}
	c.at[id] = c.gen
}

// take reports whether stream id was cancelled before its END, and
// forgets it.
func (c *cutShort) take(id string) bool {
	if len(c.at) == 0 {
		return false
	}
	if _, ok := c.at[id]; ok {
		delete(c.at, id)
		if len(c.at) == 0 {
			clear(c.ring) // every memory went early: none holds its id on
			c.ring, c.next = c.ring[:0], 0
		}
		return true
	}
	return false
}

// streamRequests is what a tracker knows of one stream.
type streamRequests struct {
	id      string
	pending *Request   // PARAMs seen, END not yet
	queue   []*Request // complete, waiting for active to end
	active  *Request   // being answered
	stop    func()     // stops active's work; may be nil
}

// Frame takes a frame written into the adapter's sink. It returns a request
// the adapter must start now: one that an END completed while no other
// request of its stream was active; nil otherwise. CANCEL and ABORT stop
// the active request (calling the stop function given to [Tracker.Start])
// and emit ERROR("cancelled") and END through emit for every request of
// the stream not yet ended. A request whose END had not come is answered
// then too; its END, if it comes before another PARAM of the stream,
// is ignored, and a PARAM starts a new request. Only the latest
// 4096 streams so cancelled are remembered, so that clients abandoning
// their requests for good cost nothing unbounded. Other frames are ignored.
func (t *Tracker) Frame(f *messages.Frame, emit func(*messages.Frame)) *Request {
	id := f.GetStreamId()
	switch f.GetType() {
	case messages.FrameType_PARAM:
		t.cut.take(id) // a new request: the cancelled one's END will not come
		s := t.stream(id)
		if s.pending == nil {
			s.pending = t.newRequest(id)
		}
		s.pending.Params = append(s.pending.Params, Param{Name: f.GetName(), Value: f.GetPayload()})
	case messages.FrameType_END:
		if t.cut.take(id) {
			return nil // the END of a request CANCEL answered already
		}
		s := t.stream(id)
		req := s.pending
		if req == nil {
			if req = t.released(id); req == nil {
				req = &Request{StreamID: id}
			}
		}
		s.pending = nil
		if s.active != nil {
			s.queue = append(s.queue, req)
			return nil
		}
		s.active = req
		return req
	case messages.FrameType_CANCEL, messages.FrameType_ABORT:
		if f.GetToolCallId() != "" {
			return nil // cancels a tool call, not the model's answer
		}
		s, ok := t.lookup(id)
		if !ok {
			return nil
		}
		t.remove(s)
		if s.stop != nil {
			s.stop()
		}
		n := len(s.queue)
		if s.active != nil {
			n++
		}
		if s.pending != nil {
			n++
			t.cut.add(id)
		}
		for range n {
			emit(messages.Error(id, ErrCancelled.Error()))
			emit(messages.End(id))
		}
	}
	return nil
}

// newRequest returns a request of stream without PARAMs: the one given
// back by Release, or a new one with room for a few PARAMs in the same
// allocation.
func (t *Tracker) newRequest(stream string) *Request {
	if r := t.released(stream); r != nil {
		return r
	}
	r := &requestWithParams{}
	r.StreamID, r.Params = stream, r.few[:0]
	return &r.Request
}

// released returns the request given back by Release as a request of
// stream, or nil.
func (t *Tracker) released(stream string) *Request {
	r := t.spareRequest
	if r != nil {
		t.spareRequest = nil
		r.StreamID = stream
	}
	return r
}

type requestWithParams struct {
	Request
	few [4]Param
}

func (t *Tracker) stream(id string) *streamRequests {
	s, ok := t.lookup(id)
	if !ok {
		s, t.spare = t.spare, nil
		if s == nil {
			s = &streamRequests{}
		}
		s.id = id
		t.streams.Add(id, s)
	}
	return s
}

// lookup returns the stream id's requests, if it has any.
func (t *Tracker) lookup(id string) (*streamRequests, bool) { return t.streams.Get(id) }

// remove forgets s.
func (t *Tracker) remove(s *streamRequests) { t.streams.Delete(s.id) }

// Start records the function that stops the work answering req (a
// cancel function from actors.Context.Go, a timer's stop, nil when
// answering needs no background work). It replaces an earlier one.
func (t *Tracker) Start(req *Request, stop func()) {
	if s, ok := t.lookup(req.StreamID); ok && s.active == req {
		s.stop = stop
	}
}

// Live reports whether req is still being answered: it was started and
// neither cancelled nor done. News about a request that is not live (late
// progress of cancelled work) must be dropped.
func (t *Tracker) Live(req *Request) bool {
	s, ok := t.lookup(req.StreamID)
	return ok && s.active == req
}

// Done says the adapter has emitted the END of req. It returns the next
// request of the stream to start, if one is queued.
func (t *Tracker) Done(req *Request) *Request {
	s, ok := t.lookup(req.StreamID)
	if !ok || s.active != req {
		return nil
	}
	s.active, s.stop = nil, nil
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.active = next
		return next
	}
	if s.pending == nil {
		t.remove(s)
		*s = streamRequests{queue: s.queue[:0]}
		t.spare = s
	}
	return nil
}

// Release gives back req, a request the adapter has called [Tracker.Done]
// for and keeps no reference to (no record of it, no timer or work keyed
// by it, nothing of its Params): the tracker makes its next request in
// req's storage instead of allocating one. A request the adapter keeps
// is not released, and is simply collected once unused. Release ignores
// a request its stream is still answering or has queued.
func (t *Tracker) Release(req *Request) {
	if s, ok := t.lookup(req.StreamID); ok && (s.active == req || s.pending == req || slices.Contains(s.queue, req)) {
		return
	}
	clear(req.Params)
	*req = Request{Params: req.Params[:0]}
	t.spareRequest = req
}

// Open reports how many streams have a request not yet ended.
func (t *Tracker) Open() int { return t.streams.Len() }

// FinishFrame builds the META frame carrying a response's finish reason.
func FinishFrame(streamID, reason string) *messages.Frame {
	payload, _ := json.Marshal(reason) // a string always encodes
	return messages.Meta(streamID, MetaFinish, payload)
}

// UsageFrame builds the META frame carrying a response's token counts.
func UsageFrame(streamID string, usage json.RawMessage) *messages.Frame {
	return messages.Meta(streamID, MetaUsage, usage)
}
