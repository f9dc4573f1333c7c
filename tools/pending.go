package tools

import (
	"cmp"
	"slices"

	"github.com/polyweave/polyweave-go/messages"
)

// PendingCall is a streaming tool call whose arguments are still arriving.
type PendingCall struct {
	// Seq orders calls by the arrival of their TOOL_CALL frame.
	Seq        uint64
	StreamID   string
	ToolCallID string
	Name       string
	Index      uint32
	// Args is the concatenation of the chunks received so far.
	Args []byte
}

// PendingCalls is the state of a streaming router: the calls whose
// arguments are still arriving, keyed by (stream id, tool-call id), never by
// arrival order, so interleaved parallel calls are assembled correctly.
//
// It is event-sourced: [Assembler.Decide] turns a frame into an [Event]
// without changing anything, and [PendingCalls.Apply] is the one method
// that changes the state, a deterministic function of the state and the
// event. A durable owner persists the event first and applies it after,
// and replays stored events through the same Apply on recovery. The zero
// value is empty and ready; it is not safe for concurrent use.
type PendingCalls struct {
	calls map[callKey]*PendingCall
	// bySeq indexes calls by Seq once a chunk names its call by Seq alone
	// (a stored event replayed) or a state is restored; until then nothing
	// needs it, and live calls cost no upkeep of it.
	bySeq    map[uint64]*PendingCall
	byStream map[string]int // pending calls per stream
	seq      uint64
	// last is the call last started or found, nil once removed: the
	// chunks of a call mostly follow each other, and so find it without
	// hashing its key.
	last *PendingCall
	// closedAt holds, for the streams closed towards the consumer whose
	// calls wait for it to write on them again, when they began to wait
	// (Unix nanoseconds): a durable router's limit on recovered calls
	// counts from it (see messages.ClosedStream). A stream leaves it when
	// it has no pending call left.
	closedAt map[string]int64
}

// Len is the number of pending calls.
func (p *PendingCalls) Len() int { return len(p.calls) }

// Has reports whether the call is pending.
func (p *PendingCalls) Has(streamID, toolCallID string) bool {
	return p.find(streamID, toolCallID) != nil
}

// find returns the pending call (streamID, toolCallID), nil when there is
// none.
func (p *PendingCalls) find(streamID, toolCallID string) *PendingCall {
	if c := p.last; c != nil && c.ToolCallID == toolCallID && c.StreamID == streamID {
		return c
	}
	c := p.calls[callKey{streamID, toolCallID}]
	if c != nil {
		p.last = c
	}
	return c
}

// InStream is the number of pending calls of a stream.
func (p *PendingCalls) InStream(streamID string) int {
	if len(p.calls) == 0 {
		return 0
	}
	return p.byStream[streamID]
}

// SeqOf returns the Seq of a pending call.
func (p *PendingCalls) SeqOf(streamID, toolCallID string) (seq uint64, ok bool) {
	c := p.find(streamID, toolCallID)
	if c == nil {
		return 0, false
	}
	return c.Seq, true
}

func (p *PendingCalls) counted(streamID string, delta int) {
	if p.byStream == nil {
		p.byStream = map[string]int{}
	}
	if n := p.byStream[streamID] + delta; n > 0 {
		p.byStream[streamID] = n
	} else {
		delete(p.byStream, streamID)
		if len(p.closedAt) > 0 {
			delete(p.closedAt, streamID)
		}
	}
}

// indexed adds c to the index by Seq, when there is one.
func (p *PendingCalls) indexed(c *PendingCall) {
	if p.bySeq != nil {
		p.bySeq[c.Seq] = c
	}
}

// withSeq returns the pending call with seq, nil when there is none. The
// first call makes the index by Seq, kept from then on.
func (p *PendingCalls) withSeq(seq uint64) *PendingCall {
	if p.bySeq == nil {
		p.bySeq = make(map[uint64]*PendingCall, len(p.calls))
		for _, c := range p.calls {
			p.bySeq[c.Seq] = c
		}
	}
	return p.bySeq[seq]
}

// inStream returns the pending calls of a stream (not copies), in the
// order they started.
func (p *PendingCalls) inStream(streamID string) []*PendingCall {
	var out []*PendingCall
	for k, c := range p.calls {
		if k.stream == streamID {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *PendingCall) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Snapshot returns a copy of every pending call, in the order they started.
func (p *PendingCalls) Snapshot() []PendingCall {
	out := make([]PendingCall, 0, len(p.calls))
	for _, c := range p.calls {
		cp := *c
		cp.Args = nil // a call without arguments yet has none, whatever room it has for them
		if len(c.Args) > 0 {
			cp.Args = slices.Clone(c.Args)
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b PendingCall) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// State returns the pending calls (as Snapshot) in their protobuf form,
// for snapshots and [RestoreFrame]; an [Event] of kind EventRestored with
// it brings any PendingCalls to the same state.
func (p *PendingCalls) State() *messages.RouterState {
	calls := p.Snapshot()
	st := &messages.RouterState{Calls: make([]*messages.PendingToolCall, len(calls)), LastSeq: p.seq}
	for i, c := range calls {
		st.Calls[i] = &messages.PendingToolCall{Seq: c.Seq, StreamId: c.StreamID, ToolCallId: c.ToolCallID,
			Name: c.Name, Index: c.Index, Args: c.Args}
	}
	if len(p.closedAt) > 0 {
		st.Closed = make([]*messages.ClosedStream, 0, len(p.closedAt))
		for stream, at := range p.closedAt {
			st.Closed = append(st.Closed, &messages.ClosedStream{StreamId: stream, ClosedAt: at})
		}
		slices.SortFunc(st.Closed, func(a, b *messages.ClosedStream) int { return cmp.Compare(a.StreamId, b.StreamId) })
	}
	return st
}

// restore replaces the state with st's calls (Apply of EventRestored).
// A call repeated in st (same stream and id) keeps its last entry.
func (p *PendingCalls) restore(st *messages.RouterState) {
	calls := st.GetCalls()
	p.last = nil
	p.calls = make(map[callKey]*PendingCall, len(calls))
	p.byStream = map[string]int{}
	p.bySeq = make(map[uint64]*PendingCall, len(calls))
	p.seq = st.GetLastSeq()
	for _, m := range calls {
		c := &PendingCall{Seq: m.GetSeq(), StreamID: m.GetStreamId(), ToolCallID: m.GetToolCallId(),
			Name: m.GetName(), Index: m.GetIndex(), Args: slices.Clone(m.GetArgs())}
		k := callKey{c.StreamID, c.ToolCallID}
		if old, dup := p.calls[k]; dup {
			delete(p.bySeq, old.Seq)
		} else {
			p.counted(c.StreamID, 1)
		}
		if old, dup := p.bySeq[c.Seq]; dup && old != c { // two calls claim one seq: the later wins it
			delete(p.calls, callKey{old.StreamID, old.ToolCallID})
			p.counted(old.StreamID, -1)
		}
		p.calls[k] = c
		p.indexed(c)
		p.seq = max(p.seq, c.Seq)
	}
	p.closedAt = nil
	for _, cs := range st.GetClosed() {
		p.closeStream(cs.GetStreamId(), cs.GetClosedAt())
	}
}

// closeStream notes that stream's calls wait from at (Unix nanoseconds),
// unless they wait already or there are none. An at of zero (the field
// unset) is no time: the calls wait from the recovery that finds them
// without one, as those of a state stored before closed times.
func (p *PendingCalls) closeStream(stream string, at int64) {
	if at == 0 || p.InStream(stream) == 0 {
		return
	}
	if _, ok := p.closedAt[stream]; ok {
		return
	}
	if p.closedAt == nil {
		p.closedAt = map[string]int64{}
	}
	p.closedAt[stream] = at
}
