package tools

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
)

// eventWriter stores events as an actor's next events in one durable
// write and returns once they are durable (a failure panics: see
// durability.Provider). actors.Persister is one.
type eventWriter interface {
	PersistEvents(events []proto.Message)
}

// Bounds of what a durable router holds before writing it: a long
// streamed argument is written in pieces of at most this many chunks or
// bytes of chunk.
const (
	maxHeldChunks = 1024
	maxHeldBytes  = 32 << 10
)

// durableCore is the decision logic of a durable router, outside the
// actor: decide, persist, then apply, with the argument chunks of a run
// of frames written together.
//
// A chunk changes nothing outside the router until its call completes or
// its stream ends. So the core holds the chunk events it decides, neither
// persisted nor applied, and writes them in one store call with the next
// event that does show (a call starting or completing, a stream ending:
// see step), or when its owner flushes it, before anything else leaves
// the router. Held events are applied only once durable and in order, so
// the state is always what the store holds: a snapshot requested during
// a write is the state before its first event, as a persistent duplex
// requires.
//
// A held chunk is staged where it will end up: its bytes are appended to
// its call's arguments past their length (PendingCall.Args[len:cap]), so
// that the state does not show them, and the write stores slices of that
// room; applying them extends the arguments' length over them. A chunk
// thus costs one copy, as in a router without durability, and no
// bookkeeping of its own: consecutive chunks of a call are one run.
type durableCore struct {
	asm *Assembler
	// also, when set, returns the event written with the one step
	// decided, in the same store call and applied after it (Kind
	// EventNone for none): what the owner persists of a frame besides
	// what the pending calls make of it.
	also func(Event) Event
	// applied, when set, is called with each event but a chunk once it
	// is applied.
	applied func(Event)
	// endsAlone, when set, reports whether the model's END or ERROR of
	// a tool-call id ends that call alone (see Assembler.decide).
	endsAlone func(stream, call string) bool
	runs      []heldRun
	count     int // chunks held
	size      int // bytes of chunk held

	// The stored forms of a write, rebuilt for each: chunk messages are
	// reused.
	stored []proto.Message
	chunks []messages.RouterChunkAppended
}

// heldRun is a run of held chunks of one call: the bytes [from, to) past
// the length of call.Args, stored as one chunk event (Seq seq).
type heldRun struct {
	call     *PendingCall
	seq      uint64
	from, to int
}

// staged returns the bytes of r (valid until the call's arguments grow).
func (r heldRun) staged() []byte {
	n := len(r.call.Args)
	return r.call.Args[n+r.from : n+r.to]
}

// holding reports whether chunks wait to be written.
func (d *durableCore) holding() bool { return len(d.runs) > 0 }

// step decides what the response frame f does. A chunk for a pending call
// is held (step returns no event and no decisions). Any other event is
// written (with the chunks held before it, and the event also makes of
// it, in one store call) and applied, the held chunks first; step returns
// it with the decisions to carry out. A frame with decisions but no event (it passes, or an atomic
// call runs) first writes and applies what is held, so nothing leaves the
// router before the events decided before it are durable.
func (d *durableCore) step(w eventWriter, f *messages.Frame) (Event, []Decision) {
	if d.hold(f) {
		if d.full() {
			d.flush(w)
		}
		return Event{}, nil
	}
	e, ds := d.asm.decide(f, d.endsAlone)
	switch {
	case e.Kind == EventNone && len(ds) == 0: // dropped: nothing changes, nothing leaves
		return e, nil
	}
	var x Event
	if d.also != nil && e.Kind != EventNone {
		x = d.also(e)
	}
	if len(d.runs) == 0 {
		if e.Kind != EventNone {
			d.write(w, e, x)
			d.applyAll(e, x)
		}
		return e, ds
	}
	// Write the held chunks and e at once, apply the chunks, then decide
	// again: a chunk changes only arguments, so the event is the same, and
	// the decisions now carry the complete arguments.
	d.apply(d.write(w, e, x))
	e, ds = d.asm.decide(f, d.endsAlone)
	d.applyAll(e, x)
	return e, ds
}

// applyAll applies es, in order, each followed by applied.
func (d *durableCore) applyAll(es ...Event) {
	for _, e := range es {
		d.asm.Pending.Apply(e)
		if d.applied != nil && e.Kind != EventNone {
			d.applied(e)
		}
	}
}

// hold reports whether f is an argument chunk, and holds its event (the
// one Decide makes of it; none when its call is not pending). The caller
// flushes when the hold is full.
func (d *durableCore) hold(f *messages.Frame) bool {
	if !f.IsToolArgChunk() {
		return false
	}
	chunk := f.GetText()
	// While chunks are held the pending calls do not change (anything else
	// writes and applies them first), so the last run's call is still the
	// one of its key: a chunk of the same call skips the lookup.
	if k := len(d.runs) - 1; k >= 0 {
		if r := &d.runs[k]; r.call.ToolCallID == f.GetToolCallId() && r.call.StreamID == f.GetStreamId() {
			d.stage(r.call, r.to, chunk)
			r.to += len(chunk)
			return true
		}
	}
	c := d.asm.Pending.chunkCall(f)
	if c == nil {
		return true
	}
	at := 0 // bytes of c staged by earlier runs
	for k := len(d.runs) - 1; k >= 0; k-- {
		if d.runs[k].call == c {
			at = d.runs[k].to
			break
		}
	}
	d.stage(c, at, chunk)
	d.runs = append(d.runs, heldRun{call: c, seq: c.Seq, from: at, to: at + len(chunk)})
	return true
}

// stage copies chunk into the room past c's arguments, at bytes past
// their length, growing them (as append does) when the room is short.
func (d *durableCore) stage(c *PendingCall, at int, chunk string) {
	d.count++
	d.size += len(chunk)
	n := len(c.Args)
	if c.Args == nil { // room for the usual arguments at once, as appendChunk
		c.Args = make([]byte, 0, max(len(chunk), pendingArgsRoom))
	}
	c.Args = append(c.Args[:n+at], chunk...)[:n]
}

// full reports whether the hold has reached its bounds.
func (d *durableCore) full() bool { return d.count >= maxHeldChunks || d.size >= maxHeldBytes }

// persist writes what is held and then e, in one store call, and applies
// them in that order.
func (d *durableCore) persist(w eventWriter, e Event) {
	d.apply(d.write(w, e))
	d.applyAll(e)
}

// persistAll is persist of several events, written in one store call.
func (d *durableCore) persistAll(w eventWriter, es []Event) {
	d.apply(d.write(w, es...))
	d.applyAll(es...)
}

// flush writes and applies what is held.
func (d *durableCore) flush(w eventWriter) {
	if len(d.runs) > 0 {
		d.apply(d.write(w))
	}
}

// write stores the held chunks and then es (but those of Kind EventNone)
// in one call of w, and returns the runs written. They are no longer held
// once the write begins, so a write that fails is never retried (the
// store may have accepted part of it; the supervisor decides what happens
// next, see durability.Provider): their staged bytes are overwritten by
// later chunks.
//
// A run (consecutive chunks of one call) is stored as one chunk event
// holding their concatenation: appending it is the same change as
// appending them one by one, and a streamed argument costs the store one
// event per write instead of one per chunk.
func (d *durableCore) write(w eventWriter, es ...Event) []heldRun {
	runs := d.runs
	d.runs, d.count, d.size = runs[len(runs):], 0, 0 // runs stays valid: nothing is held until the write returns
	if len(d.chunks) < len(runs) {
		d.chunks = make([]messages.RouterChunkAppended, len(runs))
	}
	d.stored = d.stored[:0]
	for k, r := range runs {
		c := &d.chunks[k]
		c.Seq, c.Chunk = r.seq, r.staged()
		d.stored = append(d.stored, chunkRecord{c})
	}
	for _, e := range es {
		if e.Kind != EventNone {
			d.stored = append(d.stored, storedForm(e))
		}
	}
	w.PersistEvents(d.stored)
	for k := range runs {
		d.chunks[k].Chunk = nil // the store has copied them
	}
	return runs
}

// apply applies durable runs in order: each extends its call's arguments
// over its staged bytes (Apply of its chunk event).
func (d *durableCore) apply(runs []heldRun) {
	for _, r := range runs {
		r.call.Args = r.call.Args[:len(r.call.Args)+r.to-r.from]
	}
	clear(runs) // keep no calls alive
	d.runs = runs[:0]
}

// storedForm returns the protobuf event that stores e.
func storedForm(e Event) proto.Message {
	switch e.Kind {
	case EventCallStarted:
		return &messages.RouterCallStarted{StreamId: e.StreamID, ToolCallId: e.ToolCallID, Name: e.Name, Index: e.Index}
	case EventChunkAppended:
		return &messages.RouterChunkAppended{Seq: e.Seq, Chunk: []byte(e.Chunk)}
	case EventCallCompleted, EventCallEnded: // replayed, both remove the call
		return &messages.RouterCallCompleted{StreamId: e.StreamID, ToolCallId: e.ToolCallID}
	case EventStreamEnded:
		return &messages.RouterStreamEnded{StreamId: e.StreamID}
	case EventRestored:
		return &messages.RouterRestored{State: e.State}
	case EventStreamClosed:
		return &messages.RouterStreamClosed{StreamId: e.StreamID, ClosedAt: e.ClosedAt}
	case EventStreamOpened:
		return &messages.RouterStreamOpened{StreamId: e.StreamID}
	}
	panic(fmt.Sprintf("router event of kind %d has no stored form", e.Kind))
}

// chunkRecord is the stored form of a chunk event as a
// [durability.Appender]: it encodes itself, without protobuf's generic
// marshaling, into exactly the bytes proto.Marshal makes of its message.
type chunkRecord struct{ *messages.RouterChunkAppended }

var _ durability.Appender = chunkRecord{}

// ProtoSize implements durability.Appender.
func (r chunkRecord) ProtoSize() int {
	n := 0
	if r.Seq != 0 {
		n += protowire.SizeTag(1) + protowire.SizeVarint(r.Seq)
	}
	if len(r.Chunk) > 0 {
		n += protowire.SizeTag(2) + protowire.SizeBytes(len(r.Chunk))
	}
	return n
}

// AppendProto implements durability.Appender.
func (r chunkRecord) AppendProto(b []byte) []byte {
	if r.Seq != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, r.Seq)
	}
	if len(r.Chunk) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, r.Chunk)
	}
	return b
}
