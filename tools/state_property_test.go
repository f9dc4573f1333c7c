package tools

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// coreStep is one input of the property test: a response frame, a
// restart of the durable core (after a failure, or killed: without
// writing what it holds), a flush (the router's other turns and its
// timer), or a restore (as a restore frame does).
type coreStep struct {
	frame   *messages.Frame
	restart bool
	killed  bool
	flush   bool
	restore *messages.RouterState
}

// randomSteps generates interleaved streaming and atomic calls on a few
// streams, chunks of valid and broken JSON, chunks and completions for
// calls that are not pending, repeated call ids, CANCEL and ABORT, ENDs
// and ERRORs with calls still pending, restores, and restarts.
func randomSteps(r *rand.Rand, n int) []coreStep {
	streams := []string{"s0", "s1", "s2"}
	ids := []string{"c0", "c1", "c2", "c3"}
	// A long piece makes held chunks outgrow the room past their call's
	// arguments.
	pieces := []string{`{"a":`, `1`, `,"b":"x\u00e9"`, `}`, `{`, `]]`, `"unterminated`, ``, `null`, `é€`,
		`"` + strings.Repeat("long piece ", 40) + `"`}
	out := make([]coreStep, 0, n)
	for range n {
		s, id := streams[r.IntN(len(streams))], ids[r.IntN(len(ids))]
		var f *messages.Frame
		switch k := r.IntN(100); {
		case k < 15:
			f = messages.StreamingToolCall(s, id, "tool_"+id)
			if r.IntN(3) == 0 {
				f.Meta.Index = uint32(r.IntN(4))
			}
		case k < 55:
			f = messages.ToolArgChunk(s, id, pieces[r.IntN(len(pieces))])
		case k < 67:
			f = messages.ToolComplete(s, id)
		case k < 71:
			f = messages.ToolCall(s, id, "atomic", []byte(pieces[r.IntN(len(pieces))]))
		case k < 75:
			f = messages.Text(s, "some text")
		case k < 78:
			f = messages.Cancel(s, id)
		case k < 80:
			f = messages.Abort(s)
		case k < 85:
			f = messages.End(s)
		case k < 87:
			f = messages.Error(s, "model failed")
		case k < 89:
			f = messages.Meta(s, "usage", []byte(`{"tokens":3}`))
		case k < 92:
			out = append(out, coreStep{restart: true, killed: r.IntN(3) == 0})
			continue
		case k < 96:
			out = append(out, coreStep{flush: true})
			continue
		default:
			st := &messages.RouterState{LastSeq: uint64(r.IntN(50))}
			for i := range r.IntN(4) {
				st.LastSeq++
				st.Calls = append(st.Calls, &messages.PendingToolCall{Seq: st.LastSeq,
					StreamId: streams[r.IntN(len(streams))], ToolCallId: ids[i], Name: "restored",
					Args: []byte(pieces[r.IntN(len(pieces))])})
			}
			out = append(out, coreStep{restore: st})
			continue
		}
		out = append(out, coreStep{frame: f})
	}
	return out
}

// testRouter is the durable router's core outside an actor: its
// durableCore writes through a real Provider and store, as a persistent
// duplex does (snapshot every N events, taken at the first index of a
// write, before its events are applied); a restart flushes what is held
// (the router's OnFailure) and recovers by replaying the stored snapshot
// and events through Apply.
type testRouter struct {
	asm   Assembler
	core  durableCore
	prov  *durability.Provider
	name  string
	every int
	index int // the next event's index
}

func newTestRouter(prov *durability.Provider, every int) *testRouter {
	r := &testRouter{prov: prov, name: "router", every: every}
	r.core.asm = &r.asm
	return r
}

// PersistEvents implements eventWriter.
func (d *testRouter) PersistEvents(events []proto.Message) {
	first := d.index
	d.prov.PersistEvents(d.name, first, events)
	if next := (first + d.every - 1) / d.every * d.every; next < first+len(events) {
		d.prov.PersistSnapshot(d.name, first, d.asm.Pending.State()) // the state before these events
	}
	d.index = first + len(events)
}

// restart ends the incarnation (writing what it holds, as OnFailure does,
// unless killed) and recovers a new one.
func (d *testRouter) restart(t *testing.T, killed bool) {
	if !killed {
		d.core.flush(d)
	}
	d.asm, d.core, d.index = Assembler{}, durableCore{asm: &d.asm}, 0
	apply := func(msg any) {
		e, ok := eventOf(msg)
		if !ok {
			t.Fatalf("recovered %T, not a router event", msg)
		}
		d.asm.Pending.Apply(e)
	}
	if snap, at, ok := d.prov.GetSnapshot(d.name); ok {
		apply(snap)
		d.index = at
	}
	d.prov.GetEvents(d.name, d.index, 0, func(e any) {
		apply(e)
		d.index++
	})
}

// state is the router's state once what it holds is durable.
func (d *testRouter) state() *messages.RouterState {
	var p PendingCalls
	p.Apply(Event{Kind: EventRestored, State: d.asm.Pending.State()})
	for _, r := range d.core.runs {
		p.Apply(Event{Kind: EventChunkAppended, Seq: r.seq, Chunk: string(r.staged())})
	}
	return p.State()
}

func decisionsString(ds []Decision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%d %s %s; ", d.Kind, messages.Format(d.Frame), d.Message)
	}
	return b.String()
}

// TestPendingCalls_LiveEqualsReplayEqualsMemory is the property of the
// event-sourced core: for random frame sequences with restarts at random
// points, the durable core's decisions equal the non-durable router's
// (an Assembler's Step), its state (with what it holds applied) equals
// the non-durable state, and replaying the persisted events (from a
// snapshot or from the start) gives that state again. A router killed
// without writing what it held recovers exactly the state it had applied:
// applied is durable.
func TestPendingCalls_LiveEqualsReplayEqualsMemory(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x11))
		steps := randomSteps(r, 20+r.IntN(200))
		store := memstore.New(nil)
		prov, err := durability.NewProvider(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		live := newTestRouter(prov, 1+r.IntN(8))
		var memory Assembler
		for i, st := range steps {
			switch {
			case st.restart:
				applied := live.asm.Pending.State()
				live.restart(t, st.killed)
				if st.killed {
					if !proto.Equal(live.asm.Pending.State(), applied) {
						t.Fatalf("seed %d step %d: killed with %v applied, recovered %v", seed, i,
							applied, live.asm.Pending.State())
					}
					memory.Pending.Apply(Event{Kind: EventRestored, State: applied}) // the held chunks are lost
				}
			case st.flush:
				live.core.flush(live)
			case st.restore != nil:
				e := Event{Kind: EventRestored, State: proto.Clone(st.restore).(*messages.RouterState)}
				live.core.persist(live, e)
				memory.Pending.Apply(e)
			default:
				want := decisionsString(memory.Step(st.frame))
				_, ds := live.core.step(live, st.frame)
				if got := decisionsString(ds); got != want {
					t.Fatalf("seed %d step %d (%s): durable decided %q, in memory %q",
						seed, i, messages.Format(st.frame), got, want)
				}
			}
			if got := live.state(); !proto.Equal(got, memory.Pending.State()) {
				t.Fatalf("seed %d step %d: durable state %v, in memory %v", seed, i, got, memory.Pending.State())
			}
		}
		live.core.flush(live)
		replayed := newTestRouter(prov, live.every)
		replayed.restart(t, true)
		if !proto.Equal(replayed.asm.Pending.State(), live.asm.Pending.State()) {
			t.Fatalf("seed %d: replayed state %v, live %v", seed, replayed.asm.Pending.State(), live.asm.Pending.State())
		}
		if replayed.index != live.index {
			t.Fatalf("seed %d: replay ended at event %d, live at %d", seed, replayed.index, live.index)
		}
		store.Close()
	}
}
