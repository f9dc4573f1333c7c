package tools

import (
	"cmp"
	"slices"
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
// Every change goes through one apply method (CallStarted, ChunkAppended,
// CallCompleted, StreamEnded), each a deterministic function of the state
// and its input, so that a durable owner can persist the input as an event
// first and apply it after (and replay events on recovery). Snapshot and
// Restore convert the whole state. The zero value is empty and ready; it is
// not safe for concurrent use.
type PendingCalls struct {
	calls    map[callKey]*PendingCall
	bySeq    map[uint64]*PendingCall
	byStream map[string]int // pending calls per stream
	seq      uint64
}

// Len is the number of pending calls.
func (p *PendingCalls) Len() int { return len(p.calls) }

// Has reports whether the call is pending.
func (p *PendingCalls) Has(streamID, toolCallID string) bool {
	_, ok := p.calls[callKey{streamID, toolCallID}]
	return ok
}

// InStream is the number of pending calls of a stream.
func (p *PendingCalls) InStream(streamID string) int { return p.byStream[streamID] }

func (p *PendingCalls) counted(streamID string, delta int) {
	if p.byStream == nil {
		p.byStream = map[string]int{}
	}
	if n := p.byStream[streamID] + delta; n > 0 {
		p.byStream[streamID] = n
	} else {
		delete(p.byStream, streamID)
	}
}

// CallStarted registers a streaming call. It reports false (and changes
// nothing) when a call with that id is already pending in the stream.
func (p *PendingCalls) CallStarted(streamID, toolCallID, name string, index uint32) bool {
	k := callKey{streamID, toolCallID}
	if _, dup := p.calls[k]; dup {
		return false
	}
	if p.calls == nil {
		p.calls = map[callKey]*PendingCall{}
	}
	p.seq++
	c := &PendingCall{Seq: p.seq, StreamID: streamID, ToolCallID: toolCallID, Name: name, Index: index}
	p.calls[k] = c
	p.indexed(c)
	p.counted(streamID, 1)
	return true
}

func (p *PendingCalls) indexed(c *PendingCall) {
	if p.bySeq == nil {
		p.bySeq = map[uint64]*PendingCall{}
	}
	p.bySeq[c.Seq] = c
}

// SeqOf returns the Seq of a pending call.
func (p *PendingCalls) SeqOf(streamID, toolCallID string) (seq uint64, ok bool) {
	c, ok := p.calls[callKey{streamID, toolCallID}]
	if !ok {
		return 0, false
	}
	return c.Seq, true
}

// ChunkAppendedSeq is ChunkAppended for the call with that Seq.
func (p *PendingCalls) ChunkAppendedSeq(seq uint64, chunk string) bool {
	c, ok := p.bySeq[seq]
	if !ok {
		return false
	}
	c.Args = append(c.Args, chunk...)
	return true
}

// ChunkAppended adds a piece of arguments to a pending call. It reports
// false when no such call is pending (the chunk is then dropped).
func (p *PendingCalls) ChunkAppended(streamID, toolCallID, chunk string) bool {
	c, ok := p.calls[callKey{streamID, toolCallID}]
	if !ok {
		return false
	}
	c.Args = append(c.Args, chunk...)
	return true
}

// CallCompleted removes a pending call and returns it with its complete
// arguments; ok is false when no such call is pending.
func (p *PendingCalls) CallCompleted(streamID, toolCallID string) (call PendingCall, ok bool) {
	k := callKey{streamID, toolCallID}
	c, ok := p.calls[k]
	if !ok {
		return PendingCall{}, false
	}
	delete(p.calls, k)
	delete(p.bySeq, c.Seq)
	p.counted(streamID, -1)
	return *c, true
}

// StreamEnded removes and returns the calls of a stream that never
// completed, in the order they started.
func (p *PendingCalls) StreamEnded(streamID string) []PendingCall {
	if p.byStream[streamID] == 0 {
		return nil
	}
	delete(p.byStream, streamID)
	var out []PendingCall
	for k, c := range p.calls {
		if k.stream == streamID {
			out = append(out, *c)
			delete(p.calls, k)
			delete(p.bySeq, c.Seq)
		}
	}
	slices.SortFunc(out, func(a, b PendingCall) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Snapshot returns a copy of every pending call, in the order they started.
func (p *PendingCalls) Snapshot() []PendingCall {
	out := make([]PendingCall, 0, len(p.calls))
	for _, c := range p.calls {
		cp := *c
		cp.Args = slices.Clone(c.Args)
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b PendingCall) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Restore replaces the state with calls (as returned by Snapshot).
func (p *PendingCalls) Restore(calls []PendingCall) {
	p.calls = make(map[callKey]*PendingCall, len(calls))
	p.byStream = map[string]int{}
	p.bySeq = make(map[uint64]*PendingCall, len(calls))
	p.seq = 0
	for _, c := range calls {
		cp := c
		cp.Args = slices.Clone(c.Args)
		k := callKey{c.StreamID, c.ToolCallID}
		if old, dup := p.calls[k]; dup {
			delete(p.bySeq, old.Seq)
		} else {
			p.counted(c.StreamID, 1)
		}
		p.calls[k] = &cp
		p.indexed(&cp)
		p.seq = max(p.seq, c.Seq)
	}
}
