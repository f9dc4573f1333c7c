package tools

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// fuzzFrames turns fuzz input into response frames: each byte picks a
// kind, stream and call id, and the next few bytes are its text.
func fuzzFrames(data []byte) []*messages.Frame {
	streams, ids := []string{"a", "b"}, []string{"c0", "c1", "c2"}
	var out []*messages.Frame
	for len(data) > 0 {
		op := data[0]
		n := min(int(op>>5), len(data)-1)
		text := string(data[1 : 1+n])
		data = data[1+n:]
		s, id := streams[op&1], ids[int(op>>1&3)%len(ids)]
		switch op % 9 {
		case 0:
			out = append(out, messages.StreamingToolCall(s, id, "tool_"+id))
		case 1, 2, 3:
			out = append(out, messages.ToolArgChunk(s, id, text))
		case 4:
			out = append(out, messages.ToolComplete(s, id))
		case 5:
			out = append(out, messages.ToolCall(s, id, "atomic", []byte(text)))
		case 6:
			out = append(out, messages.End(s))
		case 7:
			out = append(out, messages.Error(s, text))
		default:
			out = append(out, messages.Text(s, text))
		}
	}
	return out
}

// FuzzAssembler feeds arbitrary response frames to the assembler: Step
// and Decide-then-Apply decide alike and reach the same state, and the
// state survives a snapshot and restore.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte{0, 0x21, '{', 0x41, '"', 'x', 4, 6})
	f.Add([]byte{0, 2, 0x22, 'a', 1, 0x21, 'b', 7, 6, 5})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var stepped, decided Assembler
		for i, fr := range fuzzFrames(data) {
			want := decisionsString(stepped.Step(fr))
			e, ds := decided.Decide(fr)
			if got := decisionsString(ds); got != want {
				t.Fatalf("frame %d (%s): Decide %q, Step %q", i, messages.Format(fr), got, want)
			}
			decided.Pending.Apply(e)
			if !proto.Equal(decided.Pending.State(), stepped.Pending.State()) {
				t.Fatalf("frame %d (%s): states differ", i, messages.Format(fr))
			}
		}
		var restored PendingCalls
		restored.Apply(Event{Kind: EventRestored, State: stepped.Pending.State()})
		if !proto.Equal(restored.State(), stepped.Pending.State()) {
			t.Fatalf("restored %v, want %v", restored.State(), stepped.Pending.State())
		}
	})
}

// FuzzRouterEvent decodes arbitrary bytes as a stored router event or
// snapshot and applies what decodes: nothing panics, and the state stays
// consistent (its snapshot restores to itself).
func FuzzRouterEvent(f *testing.F) {
	prov, err := durability.NewProvider(memstore.New(nil), nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range []proto.Message{
		&messages.RouterCallStarted{StreamId: "a", ToolCallId: "c1", Name: "t", Index: 2},
		&messages.RouterChunkAppended{Seq: 1, Chunk: []byte(`{"x":`)},
		&messages.RouterCallCompleted{StreamId: "a", ToolCallId: "c1"},
		&messages.RouterStreamEnded{StreamId: "a"},
		&messages.RouterStreamClosed{StreamId: "a", ClosedAt: 7},
		&messages.RouterStreamOpened{StreamId: "a"},
		&messages.RouterRestored{State: &messages.RouterState{LastSeq: 3, Calls: []*messages.PendingToolCall{
			{Seq: 3, StreamId: "a", ToolCallId: "c1", Args: []byte("{")}, {Seq: 3, StreamId: "b", ToolCallId: "c1"}},
			Closed: []*messages.ClosedStream{{StreamId: "a", ClosedAt: 5}, {StreamId: "z", ClosedAt: 6}}}},
		&messages.RouterState{LastSeq: 1},
	} {
		f.Add(encodeAny(f, m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p PendingCalls
		p.Apply(Event{Kind: EventCallStarted, StreamID: "a", ToolCallID: "c1", Name: "t"})
		msg, err := prov.Decode(data)
		if err != nil {
			return
		}
		e, ok := eventOf(msg)
		if !ok {
			return
		}
		p.Apply(e)
		p.Apply(Event{Kind: EventChunkAppended, Seq: 1, Chunk: "x"})
		var restored PendingCalls
		restored.Apply(Event{Kind: EventRestored, State: p.State()})
		if !proto.Equal(restored.State(), p.State()) {
			t.Fatalf("restored %v, want %v", restored.State(), p.State())
		}
		if p.Len() != len(p.State().GetCalls()) {
			t.Fatalf("%d calls pending, %d in the snapshot", p.Len(), len(p.State().GetCalls()))
		}
	})
}

func encodeAny(f *testing.F, m proto.Message) []byte {
	store := &captureStore{Store: memstore.New(nil)}
	prov, err := durability.NewProvider(store, nil)
	if err != nil {
		f.Fatal(err)
	}
	prov.PersistEvent("x", 0, m)
	return store.last
}

// captureStore keeps a copy of the last event written.
type captureStore struct {
	durability.Store
	last []byte
}

func (s *captureStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	s.last = append([]byte(nil), data[len(data)-1]...)
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *captureStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	s.last = append([]byte(nil), data...)
	return s.Store.PersistEvent(ctx, name, index, data)
}

// FuzzSessionLoad stores arbitrary values as a session's snapshot and
// events and loads them: a load either fails with a *durability.StoreError
// or gives a state that a snapshot of it restores exactly; nothing
// panics. The input is a sequence of values, each prefixed by its length
// (one byte); the first is the snapshot when it is not empty.
func FuzzSessionLoad(f *testing.F) {
	seed := func(values ...[]byte) []byte {
		var b []byte
		for _, v := range values {
			b = append(b, byte(len(v)))
			b = append(b, v...)
		}
		return b
	}
	started := encodeAny(f, &messages.LoopStarted{SessionId: "s", FirstRequest: []byte(`[]`), Messages: [][]byte{[]byte(`{}`)}})
	f.Add(seed(nil, started, encodeAny(f, &messages.LoopCallStarted{ToolCallId: "c", Name: "t"}),
		encodeAny(f, &messages.LoopArgs{ToolCallId: "c", Chunk: []byte(`{"a"`)}),
		encodeAny(f, &messages.LoopCallSurfaced{ToolCallId: "c"}),
		encodeAny(f, &messages.LoopToolsStarted{}),
		encodeAny(f, &messages.LoopCallResult{Result: messages.RawToolResult("", "c", "t", []byte(`{}`))}),
		encodeAny(f, &messages.LoopRoundEnded{}),
		encodeAny(f, &messages.LoopText{Text: "done"}),
		encodeAny(f, &messages.LoopAnswered{})))
	old, _ := proto.Marshal(&messages.LoopSession{SessionId: "s", FirstRequest: []byte(`[]`), Phase: messages.LoopPhase_LOOP_PHASE_TOOLS,
		Calls: []*messages.LoopCall{{Call: messages.ToolCall("x", "c", "t", []byte("{"))}}})
	f.Add(seed(old, encodeAny(f, &messages.LoopRequestSent{})))
	f.Add(seed(encodeAny(f, &messages.LoopSession{SessionId: "s", Text: "hi"}), started))
	f.Fuzz(func(t *testing.T, data []byte) {
		var values [][]byte
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			values, data = append(values, data[1:1+n]), data[1+n:]
		}
		store := memstore.New(nil)
		defer store.Close()
		ctx := context.Background()
		var index uint64
		for i, v := range values {
			switch {
			case i == 0 && len(v) > 0:
				index = uint64(v[0] % 4)
				if err := store.PersistSnapshot(ctx, "s", index, v); err != nil {
					t.Fatal(err)
				}
			case i > 0:
				if err := store.PersistEvent(ctx, "s", index, v); err != nil {
					t.Fatal(err)
				}
				index++
			}
		}
		st, ok, err := ReadSession(ctx, store, "s")
		var se *durability.StoreError
		switch {
		case err != nil && !errors.As(err, &se):
			t.Fatalf("load failed with %v, not a *durability.StoreError", err)
		case err != nil || !ok:
			return
		}
		var rec sessionRecord
		rec.restore(st)
		if again := rec.state("s", st.GetSteps()); !proto.Equal(again, st) {
			t.Fatalf("snapshot restores to\n%v\nwant\n%v", again, st)
		}
		if _, err := proto.Marshal(st); err != nil {
			t.Fatal(err)
		}
	})
}
