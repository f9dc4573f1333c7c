package tools

import (
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
)

// EventKind names the change an [Event] makes to [PendingCalls].
type EventKind uint8

// The changes of [PendingCalls].
const (
	// EventNone is the zero Event: it changes nothing.
	EventNone EventKind = iota
	// EventCallStarted registers a streaming call (StreamID, ToolCallID,
	// Name, Index); the call gets the next Seq.
	EventCallStarted
	// EventChunkAppended adds Chunk to the arguments of the call with Seq.
	EventChunkAppended
	// EventCallCompleted removes the call (StreamID, ToolCallID): its
	// arguments are complete and it runs, or a CANCEL or ABORT cut them
	// short and it is answered as cancelled.
	EventCallCompleted
	// EventStreamEnded removes the calls of StreamID that never completed
	// (they are answered with error results).
	EventStreamEnded
	// EventRestored replaces every pending call with State (a snapshot
	// loaded at recovery, or a restore frame's).
	EventRestored
	// EventStreamClosed notes that the pending calls of StreamID wait for
	// the consumer to write on it again from ClosedAt (Unix nanoseconds),
	// unless they wait already (see [DurabilityOptions]); a ClosedAt of
	// zero changes nothing.
	EventStreamClosed
	// EventStreamOpened notes that the consumer wrote on StreamID again:
	// its calls wait no more.
	EventStreamOpened
	// EventCallEnded removes the call (StreamID, ToolCallID), as
	// EventCallCompleted does, when the model's END or ERROR of that call
	// alone cuts its arguments short (it is answered with an error
	// result) and the stream goes on with its other calls. A durable
	// router stores it as it stores EventCallCompleted: replayed, it
	// removes the call the same way.
	EventCallEnded
)

// Event is one change of a router's pending calls: what [Assembler.Decide]
// produces from a frame, what a durable router persists, and what
// [PendingCalls.Apply] applies, live and at recovery alike.
type Event struct {
	Kind       EventKind
	StreamID   string
	ToolCallID string
	Name       string
	Index      uint32
	// Seq names the call of a chunk.
	Seq   uint64
	Chunk string
	// State is the whole state of EventRestored.
	State *messages.RouterState
	// ClosedAt is the time of EventStreamClosed, in Unix nanoseconds.
	ClosedAt int64

	call *PendingCall // the call Decide found for a chunk: saves Apply a lookup
}

// Apply changes the state by one event. It is the only way the state
// changes: a durable router persists the events [Assembler.Decide]
// returns and then applies them here, and replays stored events through
// here at recovery, so the two cannot drift apart. Applying an event that
// does not fit the state (a chunk or completion for a call that is not
// pending, a call that is already pending) changes nothing; Decide never
// produces one.
func (p *PendingCalls) Apply(e Event) {
	switch e.Kind {
	case EventCallStarted:
		k := callKey{e.StreamID, e.ToolCallID}
		if _, dup := p.calls[k]; dup {
			return
		}
		if p.calls == nil {
			p.calls = map[callKey]*PendingCall{}
		}
		p.seq++
		entry := &pendingEntry{PendingCall: PendingCall{Seq: p.seq, StreamID: e.StreamID, ToolCallID: e.ToolCallID, Name: e.Name, Index: e.Index}}
		c := &entry.PendingCall
		c.Args = entry.room[:0]
		p.calls[k] = c
		p.indexed(c)
		p.counted(e.StreamID, 1)
		p.last = c // its chunks come next
	case EventChunkAppended:
		p.appendChunk(e.call, e.Seq, e.Chunk)
	case EventCallCompleted, EventCallEnded:
		c := p.find(e.StreamID, e.ToolCallID)
		if c == nil {
			return
		}
		delete(p.calls, callKey{e.StreamID, e.ToolCallID})
		delete(p.bySeq, c.Seq)
		p.counted(e.StreamID, -1)
		p.last = nil
	case EventStreamEnded:
		if p.InStream(e.StreamID) == 0 {
			return
		}
		delete(p.byStream, e.StreamID)
		delete(p.closedAt, e.StreamID)
		for k, c := range p.calls {
			if k.stream == e.StreamID {
				delete(p.calls, k)
				delete(p.bySeq, c.Seq)
			}
		}
		p.last = nil
	case EventRestored:
		p.restore(e.State)
	case EventStreamClosed:
		p.closeStream(e.StreamID, e.ClosedAt)
	case EventStreamOpened:
		delete(p.closedAt, e.StreamID)
	}
}

// appendChunk is Apply of a chunk event: it adds chunk to the call with
// seq; c is the call Decide found for it, if any (it saves a lookup).
func (p *PendingCalls) appendChunk(c *PendingCall, seq uint64, chunk string) {
	if c == nil || c.Seq != seq {
		if c = p.withSeq(seq); c == nil {
			return
		}
	}
	if c.Args == nil { // room for the usual arguments at once, instead of doubling from a few bytes
		c.Args = make([]byte, 0, max(len(chunk), pendingArgsRoom))
	}
	c.Args = append(c.Args, chunk...)
}

// pendingArgsRoom is the room a pending call has for its arguments before
// they need a buffer of their own: the usual arguments fit.
const pendingArgsRoom = 256

// pendingEntry is a call started live with the room for its arguments,
// in one allocation. The completed call's TOOL_CALL keeps it (its payload
// is the arguments), as it kept the arguments' buffer.
type pendingEntry struct {
	PendingCall
	room [pendingArgsRoom]byte
}

// chunkCall returns the pending call of an argument chunk, nil when there
// is none (the chunk changes nothing).
func (p *PendingCalls) chunkCall(f *messages.Frame) *PendingCall {
	return p.find(f.GetStreamId(), f.GetToolCallId())
}

// Decide says what one response frame does, without changing anything:
// the event it makes (Kind EventNone when it changes nothing) and what to
// do with the frame and the calls it concerns (see [Assembler.Step]). The
// decisions are valid until the next call of Decide or Step. Applying the
// event with [PendingCalls.Apply] brings the state where the decisions
// assume it is.
func (a *Assembler) Decide(f *messages.Frame) (Event, []Decision) {
	return a.decide(f, nil)
}

// decide is Decide, with endsAlone, when set, reporting whether the
// model's END or ERROR of tool-call id call (never "") on stream ends that
// call alone, the stream going on with its others (as the runtime ends
// one of several calls of a stream: see actors.OpensStream). Such an END
// or ERROR ends the pending call of that id, if there is one (it is
// answered as invalid arguments, as at the end of the stream), and
// leaves the stream's other calls pending: their arguments may still
// come. Without endsAlone, or when it reports false, an END or ERROR
// ends the stream whatever its tool-call id. An ERROR is judged as an
// END of its id: an ERROR of the call whose END closed the stream is
// judged as a second END of that call (see consumerCalls.endsAlone),
// the end of none of the stream's calls, as the runtime takes it (it
// drops that second END, and an ERROR opens the stream anew, owing an
// END): of the calls the model started there since, it ends only the
// one of that id.
func (a *Assembler) decide(f *messages.Frame, endsAlone func(stream, call string) bool) (Event, []Decision) {
	p := &a.Pending
	out := a.out[:0]
	var ev Event
	switch {
	case f.IsStreamingToolCall():
		if !p.Has(f.GetStreamId(), f.GetToolCallId()) {
			ev = Event{Kind: EventCallStarted, StreamID: f.GetStreamId(), ToolCallID: f.GetToolCallId(),
				Name: f.GetName(), Index: f.GetMeta().GetIndex()}
		}
	case f.GetType() == messages.FrameType_TOOL_CALL:
		out = append(out, Decision{Kind: Run, Frame: f})
	case f.IsToolArgChunk():
		if c := p.chunkCall(f); c != nil {
			ev = Event{Kind: EventChunkAppended, Seq: c.Seq, Chunk: f.GetText(), call: c}
		}
	case f.IsToolComplete():
		if c := p.find(f.GetStreamId(), f.GetToolCallId()); c != nil {
			ev = Event{Kind: EventCallCompleted, StreamID: f.GetStreamId(), ToolCallID: f.GetToolCallId()}
			out = append(out, Decision{Kind: Run, Frame: c.frame()})
		}
	case f.GetType() == messages.FrameType_END || f.GetType() == messages.FrameType_ERROR:
		if call := f.GetToolCallId(); call != "" && endsAlone != nil && p.InStream(f.GetStreamId()) > 0 &&
			endsAlone(f.GetStreamId(), call) {
			if c := p.find(f.GetStreamId(), call); c != nil {
				ev = Event{Kind: EventCallEnded, StreamID: f.GetStreamId(), ToolCallID: call}
				out = append(out, Decision{Kind: Reject, Frame: c.frame(), Message: fmt.Sprintf(
					"invalid arguments for tool %q: the call ended before the arguments were complete", c.Name)})
			}
		} else if p.InStream(f.GetStreamId()) > 0 {
			ev = Event{Kind: EventStreamEnded, StreamID: f.GetStreamId()}
			for _, pc := range p.inStream(f.GetStreamId()) {
				out = append(out, Decision{Kind: Reject, Frame: pc.frame(), Message: fmt.Sprintf(
					"invalid arguments for tool %q: the stream ended before the arguments were complete", pc.Name)})
			}
		}
		out = append(out, Decision{Kind: Pass, Frame: f})
	default:
		out = append(out, Decision{Kind: Pass, Frame: f})
	}
	a.out = out
	return ev, out
}

// eventOf returns the event a stored router message holds: one of the
// router events, or a snapshot (messages.RouterState) as EventRestored.
// ok is false for any other message.
func eventOf(msg any) (e Event, ok bool) {
	switch m := msg.(type) {
	case *messages.RouterState:
		return Event{Kind: EventRestored, State: m}, true
	case *messages.RouterCallStarted:
		return Event{Kind: EventCallStarted, StreamID: m.GetStreamId(), ToolCallID: m.GetToolCallId(),
			Name: m.GetName(), Index: m.GetIndex()}, true
	case *messages.RouterChunkAppended:
		return Event{Kind: EventChunkAppended, Seq: m.GetSeq(), Chunk: string(m.GetChunk())}, true
	case *messages.RouterCallCompleted:
		return Event{Kind: EventCallCompleted, StreamID: m.GetStreamId(), ToolCallID: m.GetToolCallId()}, true
	case *messages.RouterStreamEnded:
		return Event{Kind: EventStreamEnded, StreamID: m.GetStreamId()}, true
	case *messages.RouterRestored:
		return Event{Kind: EventRestored, State: m.GetState()}, true
	case *messages.RouterStreamClosed:
		return Event{Kind: EventStreamClosed, StreamID: m.GetStreamId(), ClosedAt: m.GetClosedAt()}, true
	case *messages.RouterStreamOpened:
		return Event{Kind: EventStreamOpened, StreamID: m.GetStreamId()}, true
	}
	return Event{}, false
}
