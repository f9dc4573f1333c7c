package inspect

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// maxText bounds the text of a response kept per session.
const maxText = 16 << 10

// Model returns spec (a model adapter) observed so that the inspector
// sees the conversations it serves: each request's messages, the
// response's text and tool calls as they come, errors, and which streams
// are open. The inspector observes the adapter's actor through
// [actors.Spec.Observe], inside the actor (no extra hop, no decoration of
// its Logic): every frame and message passes on unchanged. With
// Options.Faults it can also cut a stream ("cut a model stream": the
// stream ends with ERROR and END as if the model's connection broke, and
// the rest of the adapter's answer on it is dropped). An observer spec
// already has is kept: it sees what the inspector lets through.
func (in *Inspector) Model(spec actors.Spec) actors.Spec {
	in.mu.Lock()
	in.models[spec.Name] = true
	in.mu.Unlock()
	next := spec.Observe
	spec.Observe = func() actors.FrameObserver {
		o := &modelObserver{in: in}
		if next != nil {
			return &observerPair{first: o, then: next()}
		}
		return o
	}
	return spec
}

// cutStream asks an observed adapter to cut a stream.
type cutStream struct{ stream string }

// modelObserver is the inspector's side of one incarnation of an
// observed adapter: an actors.FrameObserver. Its fields are the actor's:
// no lock.
type modelObserver struct {
	in   *Inspector
	self actors.Ref
	// agent is the name of the actor the adapter runs under: an
	// agent's loop is named after the agent, escaped as in
	// agent.SessionKey (see Inspector.agentOf).
	agent string
	cut   map[string]bool // streams cut, until the adapter's own END
	last  sessionCache    // the session of the last frame seen (under in.mu)
	// staged is the "messages" PARAM of a request whose END has not come
	// yet, or nil.
	staged *messages.Frame
	// held is the staged messages handed over to the fold (under in.mu),
	// shown at their request's END.
	held *messages.Frame
	// turn holds this turn's frames, turn[turnAt:], after those of the
	// turns recorded and not folded yet, turn[:turnAt]: the fold reads
	// them where they were written, and drops them once shown (see
	// flush). folds is in.folds when a turn was recorded last, or when
	// the buffer was last compacted; logged is turn as the fold reads
	// it (under in.mu), set where turn moves (see grow).
	turn   []observed
	turnAt int
	folds  uint64
	logged []observed
	// The frames logged[:recorded] are recorded (the fold shows them
	// all), those of logged[:dropped] dropped by the fold (under in.mu;
	// see dropShown).
	recorded, dropped int32
	tools             []*toolStats // the tools its calls named (under in.mu)
	// timedTick is the coarse clock's tick (unix ns) of the response
	// ENDs timed last, timedInTick how many were timed in it (see
	// timeEnd).
	timedTick   int64
	timedInTick int
}

// Received implements actors.FrameObserver.
func (o *modelObserver) Received(c actors.Context, msg any) bool {
	switch v := msg.(type) {
	case *messages.Frame:
		o.request(v)
	case actors.Started:
		o.start(c.Self())
	case *cutStream:
		o.cutStream(c, v.stream)
		return false
	}
	return true
}

// Emitted implements actors.FrameObserver.
func (o *modelObserver) Emitted(f *messages.Frame) bool { return o.response(f) }

// Handled implements actors.FrameObserver.
func (o *modelObserver) Handled() {
	if len(o.turn) > o.turnAt { // most turns were shown at their END
		o.flush()
	}
}

// Ended implements actors.FrameObserver: the adapter answered for its
// open work (its FailureHandler ran).
func (o *modelObserver) Ended(err error) {
	o.flush()
	o.stop(err)
}

// observerPair is two observers of one incarnation: what first keeps
// from the Logic or drops, then does not see.
type observerPair struct {
	first, then actors.FrameObserver
}

func (p *observerPair) Received(c actors.Context, msg any) bool {
	return p.first.Received(c, msg) && p.then.Received(c, msg)
}

func (p *observerPair) Emitted(f *messages.Frame) bool {
	return p.first.Emitted(f) && p.then.Emitted(f)
}

func (p *observerPair) Handled() {
	p.first.Handled()
	p.then.Handled()
}

func (p *observerPair) Ended(err error) {
	p.first.Ended(err)
	p.then.Ended(err)
}

func (o *modelObserver) start(self actors.Ref) {
	o.self = self
	o.agent = o.in.agentOf(self.String())
	o.in.lock()
	o.in.modelsBy[self.String()] = o
	o.in.mu.Unlock()
}

// stop forgets the incarnation: its open streams were closed.
func (o *modelObserver) stop(err error) {
	in := o.in
	in.lock()
	if in.modelsBy[o.self.String()] == o {
		delete(in.modelsBy, o.self.String())
	}
	for i := range in.sessionOrder.len() {
		s := in.sessionOrder.at(i)
		n := len(s.streams)
		s.streams = slices.DeleteFunc(s.streams, func(st openStream) bool { return st.model == o })
		if len(s.streams) < n {
			s.lastError = "the model adapter stopped: " + err.Error()
		}
	}
	o.staged, o.held = nil, nil
	in.mu.Unlock()
	in.changed()
}

// toolStats returns the figures of the tool name, remembering the few
// tools the adapter's calls name: no map lookup per call; in.mu must be
// held.
func (o *modelObserver) toolStats(name string) *toolStats {
	// The names a script or a model's decoder gives are most often the
	// very strings seen before: pointers first, then bytes.
	for _, st := range o.tools {
		if unsafe.StringData(st.name) == unsafe.StringData(name) && len(st.name) == len(name) && !st.dropped {
			return st
		}
	}
	return o.toolStatsByName(name)
}

// toolStatsByName is toolStats for a name not seen as the same string.
//
//go:noinline
func (o *modelObserver) toolStatsByName(name string) *toolStats {
	for i, st := range o.tools {
		if st.name == name {
			if !st.dropped {
				return st
			}
			o.tools = slices.Delete(o.tools, i, i+1) // gone past MaxToolRows
			break
		}
	}
	st := o.in.toolStats(name)
	if len(o.tools) < maxObservedTools && st.name == name { // not clipped, nor OtherTools
		o.tools = append(o.tools, st)
	}
	return st
}

// maxObservedTools bounds the tools an adapter's observer remembers.
const maxObservedTools = 16

// session returns the session of stream, making it; in.mu must be held.
// The last one is remembered: the frames of a response come in a row.
func (o *modelObserver) session(stream string) *session {
	if s := o.last.find(stream); s != nil {
		return s
	}
	s := o.in.session(stream, o.agent)
	o.last.remember(stream, s)
	return s
}

// sessionCache remembers the session of the last stream looked up: the
// frames of a response, and the results of its calls, come in a row.
// It is used under in.mu. It is written only when the stream changes:
// every pointer the hot path writes costs a write barrier while the
// garbage collector marks.
type sessionCache struct {
	stream string   // the stream last looked up
	s      *session // its session
	gen    uint64   // s.gen then: a session forgotten (and reused) since is not taken
}

// find returns the session of stream if stream is the one remembered
// and its session is still kept, or nil. Compared by stream, not by
// session: no parsing of the stream's id on the hot path.
func (c *sessionCache) find(stream string) *session {
	if s := c.s; s != nil && s.gen == c.gen && sameString(c.stream, stream) {
		return s
	}
	return nil
}

// remember makes s the session find returns for stream.
func (c *sessionCache) remember(stream string, s *session) {
	if c.s != s || c.gen != s.gen || !sameString(c.stream, stream) {
		c.stream, c.s, c.gen = stream, s, s.gen
	}
}

// session returns the session of stream served by agent, making it (or
// taking the session of its id that no agent served yet); in.mu must be
// held. A session made is the one of the next tool result (a new
// conversation's first result is its).
func (in *Inspector) session(stream, agent string) *session {
	key := sessionKey(stream)
	h := in.index.hash(key)
	first, free := in.index.find(key, h)
	if first != nil {
		if sameString(first.agent, agent) {
			return first
		}
		if s := in.twinSession(key, agent, h); s != nil {
			return s
		}
	}
	s := in.spare
	in.spare = nil
	if s == nil {
		s = &session{}
	}
	s.id, s.agent, s.hash, s.updated = key, agent, h, in.clock.unixNano()
	if first == nil {
		in.index.addAt(s, free) // the slot the look-up ended at
	} else {
		in.index.add(s) // a twin: after its id's sessions
	}
	in.sessionOrder.push(s)
	in.forget(s)
	if first != nil {
		in.twinMade(s)
	} else {
		in.results.remember(stream, s)
	}
	return s
}

// twinSession returns the session id of agent, whose hash is h, when
// the first session of id kept is not: another agent's session of its
// id is (a twin), or one no agent served yet, which is taken; nil when
// there is none (it is to be made). in.mu must be held.
//
//go:noinline
func (in *Inspector) twinSession(id, agent string, h uint64) *session {
	if s := in.index.findAgent(id, agent, h); s != nil {
		return s
	}
	var unserved *session
	in.index.twins(id, h, func(o *session) bool {
		if o.agent == "" {
			unserved = o
		}
		return unserved == nil
	})
	if unserved != nil {
		unserved.agent = agent // the agent serving it is known now
	}
	return unserved
}

// twinMade marks s, just made, and the sessions of its id twins; the
// next tool result is found by its call. in.mu must be held.
//
//go:noinline
func (in *Inspector) twinMade(s *session) {
	in.index.markTwins(s)
	in.results = sessionCache{}
}

// request sees a frame written into the adapter.
func (o *modelObserver) request(f *messages.Frame) {
	switch f.GetType() {
	case messages.FrameType_PARAM:
		if f.GetName() != models.ParamMessages {
			return
		}
		// Kept until the request's END: another stream's request in
		// between shows it at once.
		if o.staged != nil && o.staged.GetStreamId() != f.GetStreamId() {
			o.flushStaged()
		}
		o.staged = f
	case messages.FrameType_END, messages.FrameType_CANCEL, messages.FrameType_ABORT:
		o.add(observed{f: f, request: true})
	}
}

// add appends a frame to the turn. The buffer grows under in.mu (see
// grow): the fold drops the frames it showed from the buffer, and an
// append that grows it reads them all.
func (o *modelObserver) add(ob observed) {
	if len(o.turn) == cap(o.turn) {
		o.grow()
	}
	o.turn = append(o.turn, ob)
}

// grow makes room in the turn's buffer, under in.mu: the frames the
// fold showed since the last turn recorded are dropped (moveTurn),
// and if no room was freed so, the buffer is copied into one twice as
// large, which the fold reads from then on.
//
//go:noinline
func (o *modelObserver) grow() {
	in := o.in
	in.mu.Lock()
	if o.folds != in.folds { // the turns recorded before were folded
		if o.turnAt > 0 {
			o.moveTurn()
		}
		o.folds = in.folds
	}
	if len(o.turn) == cap(o.turn) {
		grown := make([]observed, len(o.turn), max(8, 2*cap(o.turn)))
		copy(grown, o.turn)
		o.turn = grown
		o.logged = grown[:cap(grown)]
	}
	in.mu.Unlock()
}

// observed is a frame seen in the current turn of the adapter, recorded
// at the end of the turn or at the next END or ERROR it emits, whichever
// comes first: one lock a turn, not one a frame. Nothing waits on what
// is recorded before: the loop runs the calls of a response at its END,
// which is recorded before it goes out (and a tool result is recorded
// after it, so shown after it: see Inspector.fold).
type observed struct {
	f       *messages.Frame
	request bool // written into the adapter; otherwise emitted by it
}

// flush records the frames observed in this turn, for the fold. They
// are handed over, not copied: the record places them in the
// observer's buffer, which keeps them until they are folded; the fold
// drops them once shown (an adapter idle after a fold keeps none
// reachable). The next turns' frames follow them; the first turn
// recorded after a fold moves its frames (a few) to the buffer's
// start, which the fold left free. The buffer holds at most the frames
// of the observer's records waiting in the log, and the turn's.
func (o *modelObserver) flush() {
	if len(o.turn) == o.turnAt {
		return
	}
	in := o.in
	now := in.clock.unixNano()
	var at time.Duration
	if last := o.turn[len(o.turn)-1]; !last.request && last.f.GetType() == messages.FrameType_END {
		at = o.timeEnd(now)
	}
	staged := o.staged // handed over: the fold keeps it until its request's END
	o.staged = nil
	in.mu.Lock()
	in.logged()
	if o.folds != in.folds { // the turns recorded before were folded
		if o.turnAt > 0 {
			o.moveTurn()
		}
		o.folds = in.folds
	}
	if o.recorded == o.dropped { // its first frames recorded since they were dropped
		in.dirty = append(in.dirty, o)
	}
	in.log = append(in.log, record{o: o, x: staged, now: now, at: at,
		first: int32(o.turnAt), n: int32(len(o.turn) - o.turnAt)})
	o.recorded = int32(len(o.turn))
	if at > 0 {
		in.timed++
	}
	if len(in.log) >= foldAt {
		in.fold()
	}
	in.mu.Unlock()
	o.turnAt = len(o.turn)
}

// dropShown drops the frames of the buffer the fold has shown (all
// those recorded) and not dropped yet: an observer idle from then on
// keeps none reachable (see flush). Once an observer a fold, not once
// a turn: the frames of its turns follow each other in the buffer. A
// store a frame, where clear cost BenchmarkHooks about 20 ns a run
// more (it calls the runtime, for about a hundred frames a fold).
// in.mu must be held.
func (o *modelObserver) dropShown() {
	shown := o.logged[o.dropped:o.recorded]
	for i := range shown {
		shown[i].f = nil
	}
	o.dropped = o.recorded
}

// moveTurn moves the turn's frames to the start of the buffer, the
// frames before them folded (and dropped by the fold), and drops the
// turn's frames left behind where they were; in.mu must be held.
//
//go:noinline
func (o *modelObserver) moveTurn() {
	n := copy(o.turn, o.turn[o.turnAt:])
	clear(o.turn[max(n, o.turnAt):])
	o.turn, o.turnAt = o.turn[:n], 0
	o.recorded, o.dropped = 0, 0
}

// timeEnd returns when a response END (at now, from the coarse clock)
// went out, on monoNow, if the calls it runs are timed, else 0:
// timedPerTick ENDs of the adapter per tick at most, as reading the
// system clock is what costs. Apart: the hot path stays short.
//
//go:noinline
func (o *modelObserver) timeEnd(now int64) time.Duration {
	if now != o.timedTick {
		o.timedTick, o.timedInTick = now, 0
	}
	if o.timedInTick >= timedPerTick {
		return 0
	}
	o.timedInTick++
	return monoNow()
}

// applyRecord shows a turn the adapter recorded (see flush), whose
// frames are turn; in.mu must be held.
func (o *modelObserver) applyRecord(r *record, turn []observed) {
	if r.x != nil {
		if o.held != nil && !sameString(o.held.GetStreamId(), r.x.GetStreamId()) {
			o.showAlone(o.held) // another stream's came before their END, as in request
		}
		if o.held = r.x; len(turn) == 0 { // staged messages shown alone (see flushStaged)
			o.showAlone(r.x)
			o.held = nil
			return
		}
	}
	if !o.applyCommonTurn(r, turn) {
		o.applyTurn(r, turn)
	}
}

// showAlone shows staged messages without their request's END; in.mu
// must be held.
//
//go:noinline
func (o *modelObserver) showAlone(staged *messages.Frame) {
	o.in.timed -= o.session(staged.GetStreamId()).request(staged.GetPayload())
}

// applyCommonTurn shows the common turn, if this turn is one, and
// reports whether it was: the END of one request written in, answered by
// the response's frames on its stream up to their END (no stream opened
// or closed, one session looked up); in.mu must be held.
func (o *modelObserver) applyCommonTurn(r *record, turn []observed) bool {
	if len(turn) < 2 || !turn[0].request {
		return false // turn[0] the request, and the only one (below): the rest are the response's
	}
	now := r.now
	req, last := turn[0].f, turn[len(turn)-1].f
	if req.GetType() != messages.FrameType_END || last.GetType() != messages.FrameType_END {
		return false
	}
	stream := req.GetStreamId()
	for i := 1; i < len(turn); i++ {
		if turn[i].request || !sameString(turn[i].f.GetStreamId(), stream) {
			return false
		}
	}
	s := o.session(stream)
	o.applyRequest(s, req, now, true)
	for i := 1; i < len(turn)-1; i++ {
		o.applyResponse(s, turn[i].f, now, 0)
	}
	o.applyResponse(s, last, now, r.at)
	return true
}

// applyTurn shows any turn; in.mu must be held.
//
//go:noinline
func (o *modelObserver) applyTurn(r *record, turn []observed) {
	now := r.now
	var s *session // the session of stream, the stream of the frame before
	var stream string
	for i, ob := range turn {
		// Frames of one stream come in a row: one look-up for them (no
		// other session is made in between, which could forget s).
		if f := ob.f.GetStreamId(); s == nil || !sameString(f, stream) {
			stream, s = f, o.session(f)
		}
		switch {
		case ob.request:
			o.applyRequest(s, ob.f, now, endsInTurn(turn, i))
		case i == len(turn)-1:
			o.applyResponse(s, ob.f, now, r.at) // the END timed, if one was
		default:
			o.applyResponse(s, ob.f, now, 0)
		}
	}
}

// endsInTurn reports whether the stream of the request frame turn[i]
// is answered to its END later in the same turn: an adapter that answers
// at once (a scripted model, a cache) opens and closes it unseen, and
// the stream's record is neither made nor dropped.
func endsInTurn(turn []observed, i int) bool {
	f := turn[i].f
	if f.GetType() != messages.FrameType_END {
		return false
	}
	stream := f.GetStreamId()
	for _, ob := range turn[i+1:] {
		if sameString(ob.f.GetStreamId(), stream) {
			if ob.request { // a new request of the stream: it stays open
				return false
			}
			if ob.f.GetType() == messages.FrameType_END {
				return true
			}
		}
	}
	return false
}

// applyRequest shows a request's END, CANCEL or ABORT (with answered,
// an END whose response ends in the same turn) in s, its session; in.mu
// must be held.
func (o *modelObserver) applyRequest(s *session, f *messages.Frame, now int64, answered bool) {
	stream := f.GetStreamId()
	if o.held != nil && sameString(o.held.GetStreamId(), stream) {
		o.in.timed -= s.request(o.held.GetPayload())
		o.held = nil
	}
	switch f.GetType() {
	case messages.FrameType_END:
		s.requests++
		s.updated = now
		if !answered {
			s.openStream(stream, o, now)
		}
	default:
		s.cancelled(f)
	}
}

// cancelled shows a CANCEL or ABORT written into the adapter.
//
//go:noinline
func (s *session) cancelled(f *messages.Frame) {
	s.lastError = fmt.Sprintf("%s sent on %s", f.GetType(), f.GetStreamId())
}

// flushStaged records the staged messages to be shown alone (a turn of
// one record without a frame).
func (o *modelObserver) flushStaged() {
	in := o.in
	in.mu.Lock()
	in.logged()
	in.log = append(in.log, record{o: o, x: o.staged})
	if len(in.log) >= foldAt {
		in.fold()
	}
	in.mu.Unlock()
	o.staged = nil
}

// request starts a new request of s with its messages. It returns how
// many of the calls it forgot were timed.
func (s *session) request(messages json.RawMessage) int {
	s.messages = messages
	s.text = s.text[:0]
	s.answered = false
	return s.clearCalls() // the follow-up carries their results
}

// response sees a frame the adapter emits and reports whether to pass it
// on (not when its stream was cut). An END or ERROR is shown before it
// goes on.
func (o *modelObserver) response(f *messages.Frame) bool {
	if o.cut != nil && o.cutOff(f) {
		return false
	}
	switch f.GetType() {
	case messages.FrameType_TEXT, messages.FrameType_TOOL_CALL:
		o.add(observed{f: f})
	case messages.FrameType_ERROR, messages.FrameType_END:
		o.add(observed{f: f})
		o.flush()
	}
	return true // META and the rest: nothing the page shows
}

// cutOff reports whether f is of a stream cut (and forgets the cut at
// the adapter's own END of it).
//
//go:noinline
func (o *modelObserver) cutOff(f *messages.Frame) bool {
	stream := f.GetStreamId()
	if !o.cut[stream] {
		return false
	}
	if f.GetType() == messages.FrameType_END {
		delete(o.cut, stream)
	}
	return true
}

// applyResponse shows a frame the adapter emitted in s, its session;
// in.mu must be held. It runs for most frames of every turn: the rare
// cases (argument chunks, errors) are functions of their own, which
// keeps the common path's code short (the hooks' code competes with the
// runtime's for the instruction cache).
// at is monoNow at an END timed (see flush), else 0.
func (o *modelObserver) applyResponse(s *session, f *messages.Frame, now int64, at time.Duration) {
	s.updated = now
	switch f.GetType() {
	case messages.FrameType_TEXT:
		if f.IsToolArgChunk() {
			o.applyArgChunk(s, f)
		} else if len(s.text) < maxText {
			s.text = append(s.text, f.GetText()...)
		}
	case messages.FrameType_TOOL_CALL:
		if p := s.call(f.GetToolCallId()); p != nil {
			p.call, p.chunked = f, false // complete now
		} else {
			s.calls = append(s.calls, pendingCall{call: f, tool: o.toolStats(f.GetName()).index, since: now})
			s.held = max(s.held, len(s.calls))
		}
	case messages.FrameType_ERROR:
		o.applyError(s, f, now)
	case messages.FrameType_END:
		if at > 0 {
			o.in.timed-- // the END: its calls count from here, those timed
		}
		if len(s.streams) > 0 {
			s.closeStream(f.GetStreamId())
		}
		if len(s.calls) == 0 {
			if len(s.text) > 0 {
				s.answered = true // the text is a final answer
			}
			return
		}
		o.callsRun(s, now, at)
	}
}

// applyArgChunk adds a chunk of a call's arguments to its pending call;
// in.mu must be held.
//
//go:noinline
func (o *modelObserver) applyArgChunk(s *session, f *messages.Frame) {
	if p := s.call(f.GetToolCallId()); p != nil && len(p.chunks) < o.in.opts.Clip*2 {
		if !p.chunked {
			p.chunks, p.chunked = append(p.chunks[:0], p.call.GetPayload()...), true
		}
		p.chunks = append(p.chunks, f.GetText()...)
	}
}

// applyError shows a response's ERROR; in.mu must be held.
//
//go:noinline
func (o *modelObserver) applyError(s *session, f *messages.Frame, now int64) {
	s.lastError = f.GetText()
	s.errors++
	o.in.addFeed(FeedItem{Time: time.Unix(0, now), Kind: "model", Actor: o.self.String(), Alert: true,
		Text: fmt.Sprintf("model stream %s failed: %s", f.GetStreamId(), f.GetText())})
}

// callsRun marks the calls of a response that ended as running (the
// loop runs them at its END), and times a sample of them from at (when
// the END was timed, see timeEnd; 0 if not); in.mu must be held.
func (o *modelObserver) callsRun(s *session, now int64, at time.Duration) {
	for i := range s.calls {
		p := &s.calls[i]
		if p.running {
			continue
		}
		p.running = true
		if at > 0 && o.in.toolList[p.tool].timeCall(now) {
			p.dispatched = at
			o.in.timed++
		}
	}
}

// cutStream ends stream outward with ERROR and END, as a broken model
// connection would, and drops the adapter's later frames of it.
func (o *modelObserver) cutStream(c actors.Context, stream string) {
	in := o.in
	in.lock()
	id := sessionKey(stream)
	s := in.index.findAgent(id, o.agent, in.index.hash(id))
	open := false
	if s != nil {
		st := s.stream(stream)
		open = st != nil && st.model == o
	}
	in.mu.Unlock()
	if !open {
		return
	}
	c.Emit(messages.Error(stream, "model stream cut by the inspector")) // seen by Emitted
	c.Emit(messages.End(stream))
	if o.cut == nil {
		o.cut = map[string]bool{}
	}
	o.cut[stream] = true
}

// session is what the inspector knows of one conversation. The fields
// forget looks at come first (one cache line: forgetting the oldest
// session touches memory long cold); times are unix nanoseconds from the
// coarse clock.
type session struct {
	id        string         // the session's id (its streams', read by sessionKey)
	hash      uint64         // of id, in in.index
	streams   []openStream   // few: a slice
	approvals []heldApproval // calls waiting for a person, held first first
	updated   int64
	calls     []pendingCall   // tool calls of the current response without a result yet
	held      int             // calls[:held] may hold frames (removeCall leaves them past len)
	text      []byte          // the current response's text
	messages  json.RawMessage // the last request's messages
	answered  bool            // text is the final answer
	// agent is the name of the agent (escaped, as in agent.SessionKey)
	// whose session it is: the name of the tool loop around the model
	// adapter that served it; "" until a model adapter served it (a
	// session known from a call held for approval, say). Sessions are
	// kept by id and agent: two agents may serve sessions of one id.
	agent string
	// twin is set while another session of the same id (another
	// agent's) is kept: a hook that gives no agent (a tool result, an
	// approval) picks its session by its call.
	twin bool
	// gen counts the times s was forgotten (and reset for reuse): a
	// sessionCache remembering s before is stale.
	gen              uint64
	requests, errors int
	lastError        string
}

type openStream struct {
	id    string
	model *modelObserver
	since int64 // unix nanoseconds, coarse
}

// pendingCall is a call without a result yet. It keeps the model's
// TOOL_CALL frame (its id, stream, name and arguments) rather than copies
// of its strings: one pointer to write, not four.
type pendingCall struct {
	call *messages.Frame
	// chunks are the arguments streamed so far (chunked) of a call whose
	// TOOL_CALL came without them complete; kept up to twice Options.Clip.
	chunks     []byte
	chunked    bool
	tool       int32         // the figures of its tool: in.toolList[tool]
	since      int64         // when the model made it, unix nanoseconds (coarse)
	dispatched time.Duration // when, on monoNow, if its latency is measured; 0 otherwise
	running    bool          // its response ended: the loop runs it
}

func (p *pendingCall) id() string { return p.call.GetToolCallId() }

// args are the call's arguments as the model gave them (so far).
func (p *pendingCall) args() []byte {
	if p.chunked {
		return p.chunks
	}
	return p.call.GetPayload()
}

// stream returns the open stream id, or nil.
func (s *session) stream(id string) *openStream {
	for i := range s.streams {
		if s.streams[i].id == id {
			return &s.streams[i]
		}
	}
	return nil
}

func (s *session) openStream(id string, model *modelObserver, since int64) {
	if st := s.stream(id); st != nil {
		st.model, st.since = model, since
		return
	}
	s.streams = append(s.streams, openStream{id: id, model: model, since: since})
}

func (s *session) closeStream(id string) {
	for i := range s.streams {
		if s.streams[i].id == id { // the order does not matter: the page sorts them
			last := len(s.streams) - 1
			if i != last {
				s.streams[i] = s.streams[last]
			}
			s.streams[last] = openStream{}
			s.streams = s.streams[:last]
			return
		}
	}
}

// reset empties s for reuse by another session, keeping its buffers and
// writing only the fields that hold something (each pointer written is
// a write barrier while the garbage collector marks).
func (s *session) reset() int {
	timed := s.clearCalls()
	if len(s.streams) > 0 {
		clear(s.streams)
		s.streams = s.streams[:0]
	}
	if len(s.approvals) > 0 {
		clear(s.approvals)
		s.approvals = s.approvals[:0]
	}
	s.id = ""
	if s.agent != "" {
		s.agent = ""
	}
	s.gen++
	if s.messages != nil {
		s.messages = nil
	}
	if s.lastError != "" {
		s.lastError = ""
	}
	s.text = s.text[:0]
	s.updated, s.answered, s.requests, s.errors = 0, false, 0, 0
	return timed
}

// clearCalls forgets the pending calls, keeping the slice, and the
// frames removeCall left past its length: a finished call's frame (its
// arguments may be large) is kept until the session's next request at
// most. Once a request: the slots are few. It returns how many of the
// calls forgotten were timed (see Inspector.timed).
func (s *session) clearCalls() (timed int) {
	for i := range s.calls {
		if s.calls[i].dispatched > 0 {
			timed++
		}
	}
	// The slots that may hold frames, few: their pointers dropped in
	// place (what a slot holds besides is overwritten when it is reused).
	held := s.calls[:s.held]
	for i := range held {
		held[i].call, held[i].chunks = nil, nil
	}
	s.calls, s.held = s.calls[:0], 0
	return timed
}

// holds reports whether call (its frame) is one of the pending calls.
func (s *session) holds(call *messages.Frame) bool {
	for i := range s.calls {
		if s.calls[i].call == call {
			return true
		}
	}
	return false
}

// call returns the pending call id, valid until calls changes.
func (s *session) call(id string) *pendingCall {
	for i := range s.calls {
		if s.calls[i].id() == id {
			return &s.calls[i]
		}
	}
	return nil
}

// removeCall removes the pending call of call (the one of its id). The
// slot past the new length keeps its frame until the session's next
// request (clearCalls), the slot's reuse by a later call, or the session
// is forgotten: removing the last call, the common case, writes no
// pointer.
func (s *session) removeCall(call *messages.Frame) (tool int32, dispatched time.Duration, ok bool) {
	id := call.GetToolCallId()
	for i := range s.calls {
		// The loop's call is most often the adapter's frame itself.
		if p := &s.calls[i]; p.call == call || sameString(p.id(), id) {
			tool, dispatched = p.tool, p.dispatched
			if last := len(s.calls) - 1; i < last {
				copy(s.calls[i:], s.calls[i+1:])
			}
			s.calls = s.calls[:len(s.calls)-1]
			return tool, dispatched, true
		}
	}
	return 0, 0, false
}
