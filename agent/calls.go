package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/polyweave/polyweave-go/tools"
)

// callTable holds the handlers of the tool calls an agent's loops run
// that have not returned, by their ctx (each handler running has a ctx
// of its own), each with the number it began with (seq, from 1, in the
// order they began). A Close that cannot tell whether one of them called
// it knows by them that what it waits for waits for a handler (see
// Agent.awaitConversations).
//
// Every call passes it twice (see trackCalls), so it is kept in slots
// of their own, each under a lock of its own, where a handler's ctx
// hashes to: a handler takes and frees a slot no other handler running
// holds, and touches neither the agent's lock nor a lock every call
// takes (the agent's Runs take the one; the calls of many conversations
// at once would contend for the other). Handlers past the slots' number
// at once go to more, under mu. Only a Close reads the whole table.
type callTable struct {
	seq   atomic.Uint64
	slots [callSlots]callSlot
	// watched is set once a Close may wait on the table: from then on
	// each handler's start and return wakes it (see trackCalls).
	watched atomic.Bool

	mu   sync.Mutex
	more map[context.Context]uint64
}

// callSlots is the number of handlers a callTable keeps in slots: an
// agent whose handlers run more at once keeps the rest in a map.
const callSlots = 1 << callSlotBits

const callSlotBits = 4

// home is the slot a handler of ctx is kept in when it is free, else
// the first free one after it: a hash of the ctx's identity, the data
// word of the interface value (for the ctxs the tools give handlers, a
// pointer of one handler's own), its bits spread by Fibonacci hashing.
// Any function of the value would do: begin and end are given the same
// value and so start from the same slot, whatever the word holds; the
// hash only spreads the handlers running at once over the slots.
// maphash.Comparable of the ctx cost as much as the rest of a handler's
// start and return together, twice a call on the loop's goroutine.
func home(ctx context.Context) uint64 {
	w := uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&ctx))[1])
	return uint64(w) * 0x9e3779b97f4a7c15 >> (64 - callSlotBits)
}

// callSlot is a slot of a callTable: a handler's ctx (nil: free) and
// its number.
type callSlot struct {
	mu  sync.Mutex
	ctx context.Context
	seq uint64
}

func newCallTable() *callTable {
	return &callTable{}
}

// begin keeps the handler of ctx, numbered next.
func (t *callTable) begin(ctx context.Context) {
	seq := t.seq.Add(1)
	h := home(ctx)
	for i := range uint64(callSlots) {
		s := &t.slots[(h+i)%callSlots]
		s.mu.Lock()
		if s.ctx == nil {
			s.ctx, s.seq = ctx, seq
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	t.mu.Lock()
	if t.more == nil {
		t.more = map[context.Context]uint64{}
	}
	t.more[ctx] = seq
	t.mu.Unlock()
}

// end forgets the handler of ctx, which has returned. Its slot is the
// first one holding it from where its ctx hashes to: begin took the first
// free one from there, and it stayed.
func (t *callTable) end(ctx context.Context) {
	h := home(ctx)
	for i := range uint64(callSlots) {
		s := &t.slots[(h+i)%callSlots]
		s.mu.Lock()
		if s.ctx == ctx {
			s.ctx, s.seq = nil, 0
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	t.mu.Lock()
	delete(t.more, ctx)
	t.mu.Unlock()
}

// handlerCall is a handler of the agent's calls that has not returned:
// its ctx (which ends once the call is answered without it, a timeout or
// a cancel, its conversation then no longer waiting for it), the session
// whose conversation made the call, and the number it began with.
type handlerCall struct {
	ctx     context.Context
	session string
	seq     uint64
}

// running appends the handlers that have not returned to out, those of
// a ctx no handler's (CallFrom tells no call) left out, and returns it.
func (t *callTable) running(out []handlerCall) []handlerCall {
	add := func(ctx context.Context, seq uint64) {
		if call, ok := tools.CallFrom(ctx); ok {
			session, _ := SessionOf(call.StreamID)
			out = append(out, handlerCall{ctx: ctx, session: session, seq: seq})
		}
	}
	for i := range t.slots {
		s := &t.slots[i]
		s.mu.Lock()
		ctx, seq := s.ctx, s.seq
		s.mu.Unlock()
		if ctx != nil {
			add(ctx, seq)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for ctx, seq := range t.more {
		add(ctx, seq)
	}
	return out
}

// trackCalls returns the tools.RouterOptions.OnCall of the agent self
// points at, whose table of handlers is calls: it keeps each handler of
// the calls its loops run there from the handler's start to its return,
// and, once a Close may wait on it, wakes that Close. It allocates
// nothing per call, and takes the agent's lock only for a Close. It
// holds the agent weakly, as loopOwners does: its loops do not keep it.
func trackCalls(self weak.Pointer[Agent], calls *callTable) func(ctx context.Context, ended bool) {
	return func(ctx context.Context, ended bool) {
		if ended {
			calls.end(ctx)
		} else {
			calls.begin(ctx)
		}
		if calls.watched.Load() { // after the table changed: a Close that looked before it sees this
			if a := self.Value(); a != nil {
				a.mu.Lock()
				a.changedLocked()
				a.mu.Unlock()
			}
		}
	}
}
