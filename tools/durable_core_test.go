package tools

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// BenchmarkDurableCore_Chunks is the durable router's own cost per
// argument chunk, without actors: one streamed call of 256 chunks and its
// completion per 256 ops, through the in-memory Assembler alone ("memory",
// what a router without durability does) and through the durable core
// writing to memstore with a real Provider.
func BenchmarkDurableCore_Chunks(b *testing.B) {
	const chunks = 256
	frames := []*messages.Frame{messages.StreamingToolCall("s", "call", "sink")}
	for range chunks {
		frames = append(frames, messages.ToolArgChunk("s", "call", "0123456789abcdef"))
	}
	frames = append(frames, messages.ToolComplete("s", "call"), messages.End("s"))
	b.Run("memory", func(b *testing.B) {
		var a Assembler
		b.ReportAllocs()
		for i := 0; i < b.N; i += chunks {
			for _, f := range frames {
				a.Step(f)
			}
		}
	})
	b.Run("memstore", func(b *testing.B) {
		store := memstore.New(nil)
		defer store.Close()
		prov, err := durability.NewProvider(store, &durability.ProviderOptions{SnapshotInterval: DefaultSnapshotEvery})
		if err != nil {
			b.Fatal(err)
		}
		r := newTestRouter(prov, DefaultSnapshotEvery)
		b.ReportAllocs()
		for i := 0; i < b.N; i += chunks {
			for _, f := range frames {
				r.core.step(r, f)
			}
		}
	})
}

// TestChunkRecord_EncodesAsProtoMarshal: the chunk event's own encoding
// is byte for byte protobuf's, for every field combination.
func TestChunkRecord_EncodesAsProtoMarshal(t *testing.T) {
	for _, m := range []*messages.RouterChunkAppended{
		{}, {Seq: 1}, {Chunk: []byte("x")}, {Seq: 1 << 40, Chunk: []byte("\xe2\x82")},
		{Seq: 300, Chunk: bytes.Repeat([]byte("0123456789abcdef"), 2048)},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		r := chunkRecord{m}
		got := r.AppendProto([]byte("prefix"))
		if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" || r.ProtoSize() != len(want) {
			t.Errorf("seq %d, %d bytes of chunk: appended %x (size %d), proto.Marshal %x", m.Seq, len(m.Chunk),
				got[6:], r.ProtoSize(), want)
		}
	}
}

// TestDurableCore_HoldIsBounded: a long streamed argument is written in
// pieces of maxHeldChunks chunks (or maxHeldBytes bytes) while it streams,
// so a router killed before the call completes recovers every piece
// written.
func TestDurableCore_HoldIsBounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		chunk string
		n     int
		want  int // bytes of arguments recovered
	}{
		{"chunks", "x", 2*maxHeldChunks + 10, 2 * maxHeldChunks},
		{"bytes", string(bytes.Repeat([]byte("y"), 100)), maxHeldBytes/100 + 10, (maxHeldBytes/100 + 1) * 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New(nil)
			defer store.Close()
			prov, err := durability.NewProvider(store, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := newTestRouter(prov, DefaultSnapshotEvery)
			r.core.step(r, messages.StreamingToolCall("s", "call", "t"))
			for range c.n {
				r.core.step(r, messages.ToolArgChunk("s", "call", c.chunk))
			}
			if !r.core.holding() {
				t.Fatal("nothing held after the last bound")
			}
			r.restart(t, true)
			calls := r.asm.Pending.Snapshot()
			if len(calls) != 1 {
				t.Fatalf("recovered %d calls, want 1", len(calls))
			}
			if len(calls[0].Args) != c.want {
				t.Errorf("recovered %d bytes of arguments, want %d", len(calls[0].Args), c.want)
			}
		})
	}
}

// TestStateChange_JSONAsMarshal: the state frames' own encoding is byte
// for byte messages.Marshal's (encoding/json's without HTML escaping),
// plain ids and ids that need escaping alike.
func TestStateChange_JSONAsMarshal(t *testing.T) {
	for _, sc := range []stateChange{
		{Event: "started", ToolCallID: "call_1", StreamPending: 1, Pending: 3},
		{Event: "completed", ToolCallID: "call_1"},
		{Event: "stream_ended", StreamPending: 0, Pending: 12},
		{Event: "started", ToolCallID: `q"uote\back<&>`, StreamPending: 2, Pending: 2},
		{Event: "started", ToolCallID: "é\u2028\x01", Pending: 1},
		{Event: "recovered", StreamPending: 2, Pending: 2, ToolCallIDs: []string{"a", "b"}},
	} {
		want, err := messages.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.json(); !bytes.Equal(got, want) {
			t.Errorf("%+v: encoded %s, messages.Marshal %s", sc, got, want)
		}
	}
}
