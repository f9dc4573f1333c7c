package tools

import (
	"fmt"
	"slices"

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
type durableCore struct {
	asm   *Assembler
	held  []heldChunk
	spare []heldChunk // the other buffer of held (see write)
	size  int         // bytes of chunk held

	// The stored forms of a write, rebuilt for each: chunk messages and
	// the bytes of their chunks are reused.
	stored []proto.Message
	chunks []messages.RouterChunkAppended
	arena  []byte
}

// heldChunk is a held chunk event (Kind EventChunkAppended).
type heldChunk struct {
	call  *PendingCall
	seq   uint64
	chunk string
}

func (h heldChunk) event() Event {
	return Event{Kind: EventChunkAppended, Seq: h.seq, Chunk: h.chunk, call: h.call}
}

// holding reports whether chunks wait to be written.
func (d *durableCore) holding() bool { return len(d.held) > 0 }

// step decides what the response frame f does. A chunk for a pending call
// is held (step returns no event and no decisions). Any other event is
// written (with the chunks held before it, in one store call) and
// applied, the held chunks first; step returns it with the decisions to
// carry out. A frame with decisions but no event (it passes, or an atomic
// call runs) first writes and applies what is held, so nothing leaves the
// router before the events decided before it are durable.
func (d *durableCore) step(w eventWriter, f *messages.Frame) (Event, []Decision) {
	if d.hold(f) {
		if d.full() {
			d.flush(w)
		}
		return Event{}, nil
	}
	e, ds := d.asm.Decide(f)
	switch {
	case e.Kind == EventNone && len(ds) == 0: // dropped: nothing changes, nothing leaves
		return e, nil
	case len(d.held) == 0:
		if e.Kind != EventNone {
			d.write(w, e)
			d.asm.Pending.Apply(e)
		}
		return e, ds
	}
	// Write the held chunks and e at once, apply the chunks, then decide
	// again: a chunk changes only arguments, so the event is the same, and
	// the decisions now carry the complete arguments.
	d.apply(d.write(w, e))
	e, ds = d.asm.Decide(f)
	d.asm.Pending.Apply(e)
	return e, ds
}

// hold reports whether f is an argument chunk, and holds its event (the
// one Decide makes of it; none when its call is not pending). The caller
// flushes when the hold is full.
func (d *durableCore) hold(f *messages.Frame) bool {
	if !f.IsToolArgChunk() {
		return false
	}
	if c := d.asm.Pending.chunkCall(f); c != nil {
		d.held = append(d.held, heldChunk{call: c, seq: c.Seq, chunk: f.GetText()})
		d.size += len(f.GetText())
	}
	return true
}

// full reports whether the hold has reached its bounds.
func (d *durableCore) full() bool { return len(d.held) >= maxHeldChunks || d.size >= maxHeldBytes }

// persist writes what is held and then e, in one store call, and applies
// them in that order.
func (d *durableCore) persist(w eventWriter, e Event) {
	d.apply(d.write(w, e))
	d.asm.Pending.Apply(e)
}

// flush writes and applies what is held.
func (d *durableCore) flush(w eventWriter) {
	if len(d.held) > 0 {
		d.apply(d.write(w, Event{}))
	}
}

// write stores the held chunks and then e (unless its Kind is EventNone)
// in one call of w, and returns the chunks. They are no longer held once
// the write begins, so a write that fails is never retried (the store may
// have accepted part of it; the supervisor decides what happens next, see
// durability.Provider).
//
// Consecutive chunks of one call are stored as one chunk event holding
// their concatenation: appending it is the same change as appending them
// one by one, and a streamed argument costs the store one event per write
// instead of one per chunk.
func (d *durableCore) write(w eventWriter, e Event) []heldChunk {
	held, size := d.held, d.size
	d.held, d.spare, d.size = d.spare[:0], held, 0
	d.stored = d.stored[:0]
	d.arena = slices.Grow(d.arena[:0], size) // never reallocated below: the chunks' slices stay valid
	k := -1
	for _, h := range held {
		if k < 0 || d.chunks[k].Seq != h.seq {
			if k++; k == len(d.chunks) {
				d.chunks = append(d.chunks, messages.RouterChunkAppended{})
			}
			d.chunks[k].Seq, d.chunks[k].Chunk = h.seq, d.arena[len(d.arena):len(d.arena)]
			d.stored = append(d.stored, chunkRecord{&d.chunks[k]})
		}
		d.arena = append(d.arena, h.chunk...)
		c := &d.chunks[k]
		c.Chunk = c.Chunk[:len(c.Chunk)+len(h.chunk)]
	}
	if e.Kind != EventNone {
		d.stored = append(d.stored, storedForm(e))
	}
	w.PersistEvents(d.stored)
	return held
}

// apply applies durable chunks in order.
func (d *durableCore) apply(held []heldChunk) {
	for _, h := range held {
		d.asm.Pending.appendChunk(h.call, h.seq, h.chunk) // Apply(h.event())
	}
}

// storedForm returns the protobuf event that stores e.
func storedForm(e Event) proto.Message {
	switch e.Kind {
	case EventCallStarted:
		return &messages.RouterCallStarted{StreamId: e.StreamID, ToolCallId: e.ToolCallID, Name: e.Name, Index: e.Index}
	case EventChunkAppended:
		return &messages.RouterChunkAppended{Seq: e.Seq, Chunk: []byte(e.Chunk)}
	case EventCallCompleted:
		return &messages.RouterCallCompleted{StreamId: e.StreamID, ToolCallId: e.ToolCallID}
	case EventStreamEnded:
		return &messages.RouterStreamEnded{StreamId: e.StreamID}
	case EventRestored:
		return &messages.RouterRestored{State: e.State}
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
