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

// randomSessionEvent returns a random session event: mostly ones that fit
// a session (calls that exist, chunks of streaming calls), some that do
// not (unknown ids, steps out of order).
func randomSessionEvent(r *rand.Rand, step int) proto.Message {
	ids := []string{"c0", "c1", "c2"}
	id := ids[r.IntN(len(ids))]
	pieces := []string{`{"a":`, `1}`, `"x\u00e9"`, `]]`, ``, strings.Repeat("z", 300)}
	result := func() *messages.Frame {
		return messages.RawToolResult("s", id, "tool_"+id, []byte(fmt.Sprintf(`{"step":%d}`, step)))
	}
	switch k := r.IntN(100); {
	case k < 4:
		return &messages.LoopStarted{SessionId: "p", FirstRequest: []byte(`[{"role":"user","content":"hi"}]`),
			Params:   []*messages.Frame{messages.RawParam("s", "temperature", []byte("0.5"))},
			Messages: [][]byte{[]byte(`{"role":"system","content":"be brief"}`), []byte(`{"role":"user","content":"hi"}`)}}
	case k < 16:
		return &messages.LoopText{Text: pieces[r.IntN(len(pieces))]}
	case k < 26:
		return &messages.LoopCallStarted{ToolCallId: id, Name: "tool_" + id, Index: uint32(r.IntN(3))}
	case k < 56:
		return &messages.LoopArgs{ToolCallId: id, Chunk: []byte(pieces[r.IntN(len(pieces))])}
	case k < 66:
		e := &messages.LoopCallSurfaced{ToolCallId: id}
		if r.IntN(2) == 0 {
			e.Call = messages.ToolCall("s", id, "tool_"+id, []byte(`{"atomic":true}`))
		}
		if r.IntN(3) == 0 {
			e.Result = result()
		}
		return e
	case k < 78:
		return &messages.LoopCallResult{Result: result()}
	case k < 84:
		return &messages.LoopToolsStarted{}
	case k < 92:
		return &messages.LoopRoundEnded{Done: r.IntN(4) == 0, Thinking: []byte(`[{"type":"thinking"}]`)[:r.IntN(2)*21]}
	case k < 96:
		return &messages.LoopAnswered{}
	default:
		return &messages.LoopRequestSent{}
	}
}

// TestSessionRecord_LiveEqualsReplay is the property of the session's
// event-sourced core: for random event sequences written through a real
// Provider and store in random batches (text and chunks joined as the
// loop joins them), with snapshots at random intervals, events dropped
// unwritten (a failed stream) and restarts at random points, the state
// the live log holds equals the state of applying the written events one
// by one in memory, and loading the store at any point gives that state
// again.
func TestSessionRecord_LiveEqualsReplay(t *testing.T) {
	seeds := uint64(300)
	if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 0x5e55))
		store := memstore.New(nil)
		prov, err := durability.NewProvider(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := SessionOptions{ID: "p", Store: store, SnapshotEvery: 1 + r.IntN(6)}
		live := newSessionLog(o, prov)
		var memory sessionRecord
		var queued []proto.Message // as given to the log, not yet written
		load := func() *sessionLog {
			sl := newSessionLog(o, prov)
			if err := sl.load(); err != nil {
				t.Fatalf("seed %d: load: %v", seed, err)
			}
			return sl
		}
		check := func(step int, what string) {
			t.Helper()
			want := memory.state("p", live.index)
			if got := live.rec.state("p", live.index); !proto.Equal(got, want) {
				t.Fatalf("seed %d step %d (%s): live state\n%v\nin memory\n%v", seed, step, what, got, want)
			}
			loaded := load()
			if got := loaded.rec.state("p", loaded.index); !proto.Equal(got, want) || loaded.index != live.index {
				t.Fatalf("seed %d step %d (%s): loaded state (at %d)\n%v\nlive (at %d)\n%v", seed, step, what,
					loaded.index, got, live.index, want)
			}
		}
		for step := range 40 + r.IntN(160) {
			switch k := r.IntN(100); {
			case k < 70:
				e := randomSessionEvent(r, step)
				queued = append(queued, e)
				live.add(proto.Clone(e)) // add may join text into the event before it
			case k < 90:
				live.flush()
				for _, e := range queued {
					memory.apply(e)
				}
				queued = queued[:0]
				check(step, "flush")
			case k < 95:
				live.drop()
				queued = queued[:0]
			default: // the process stops: what was not written is lost
				live, queued = load(), queued[:0]
				check(step, "restart")
			}
		}
		store.Close()
	}
}
