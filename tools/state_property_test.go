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
// restart of the durable core, or a restore (as a restore frame does).
type coreStep struct {
	frame   *messages.Frame
	restart bool
	restore *messages.RouterState
}

// randomSteps generates interleaved streaming and atomic calls on a few
// streams, chunks of valid and broken JSON, chunks and completions for
// calls that are not pending, repeated call ids, CANCEL and ABORT, ENDs
// and ERRORs with calls still pending, restores, and restarts.
func randomSteps(r *rand.Rand, n int) []coreStep {
	streams := []string{"s0", "s1", "s2"}
	ids := []string{"c0", "c1", "c2", "c3"}
	pieces := []string{`{"a":`, `1`, `,"b":"x\u00e9"`, `}`, `{`, `]]`, `"unterminated`, ``, `null`, `é€`}
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
		case k < 96:
			out = append(out, coreStep{restart: true})
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

// durableCore is the durable router's core outside an actor: decide,
// persist through a real Provider and store, apply; a restart recovers
// by replaying the stored snapshot and events through Apply, as the
// router does under protoactor's persistence (snapshot every N events,
// taken before the event at its index is applied).
type durableCore struct {
	asm    Assembler
	prov   *durability.Provider
	name   string
	every  int
	index  int // the next event's index
	events routerEvents
}

func (d *durableCore) persist(e Event) {
	d.prov.PersistEvent(d.name, d.index, d.events.message(e))
	if d.index%d.every == 0 {
		d.prov.PersistSnapshot(d.name, d.index, d.asm.Pending.State()) // the state before e
	}
	d.index++
}

func (d *durableCore) recover(t *testing.T) {
	d.asm = Assembler{}
	d.index = 0
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
// (an Assembler's Step), its state after live processing equals the
// non-durable state, and replaying the persisted events (from a snapshot
// or from the start) gives that state again.
func TestPendingCalls_LiveEqualsReplayEqualsMemory(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x11))
		steps := randomSteps(r, 20+r.IntN(200))
		store := memstore.New(nil)
		prov, err := durability.NewProvider(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		every := 1 + r.IntN(8)
		live := &durableCore{prov: prov, name: "router", every: every}
		var memory Assembler
		for i, st := range steps {
			switch {
			case st.restart:
				live.recover(t)
			case st.restore != nil:
				e := Event{Kind: EventRestored, State: proto.Clone(st.restore).(*messages.RouterState)}
				live.persist(e)
				live.asm.Pending.Apply(e)
				memory.Pending.Apply(e)
			default:
				want := decisionsString(memory.Step(st.frame))
				e, ds := live.asm.Decide(st.frame)
				got := decisionsString(ds)
				if e.Kind != EventNone {
					live.persist(e)
					live.asm.Pending.Apply(e)
				}
				if got != want {
					t.Fatalf("seed %d step %d (%s): durable decided %q, in memory %q",
						seed, i, messages.Format(st.frame), got, want)
				}
			}
			if !proto.Equal(live.asm.Pending.State(), memory.Pending.State()) {
				t.Fatalf("seed %d step %d: durable state %v, in memory %v", seed, i,
					live.asm.Pending.State(), memory.Pending.State())
			}
		}
		replayed := &durableCore{prov: prov, name: "router", every: every}
		replayed.recover(t)
		if !proto.Equal(replayed.asm.Pending.State(), live.asm.Pending.State()) {
			t.Fatalf("seed %d: replayed state %v, live %v", seed, replayed.asm.Pending.State(), live.asm.Pending.State())
		}
		if replayed.index != live.index {
			t.Fatalf("seed %d: replay ended at event %d, live at %d", seed, replayed.index, live.index)
		}
		store.Close()
	}
}
