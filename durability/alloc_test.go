package durability_test

import (
	"context"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
)

// TestProvider_PersistEventAllocs holds the adapter's hot path to its
// allocation budget: none of its own (events are encoded into pooled
// buffers) and, on memstore, less than one per call (the store's copies
// are carved out of blocks).
func TestProvider_PersistEventAllocs(t *testing.T) {
	s := memstore.New(nil)
	defer s.Close()
	p := newProvider(t, s, nil)
	msg := wrapperspb.String(`{"path":"a.txt","content":"some argument chunk of a tool call"}`)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p.PersistEvent("router", i%64, msg) // overwrite: no map growth
		i++
	})
	if allocs > 0 {
		t.Errorf("PersistEvent through the provider allocates %.1f times per call, budget 0", allocs)
	}
}

// discard is a Store that accepts every event and keeps nothing, to
// measure the provider's own share of PersistEvent.
type discard struct{ durability.Store }

func (discard) PersistEvent(context.Context, string, uint64, []byte) error { return nil }
func (discard) DeleteEvents(context.Context, string, uint64) error         { return nil }
func (discard) Close() error                                               { return nil }

// BenchmarkProvider_PersistEvent: one argument chunk event (what a durable
// streaming router persists per chunk), encoded alone and into memstore.
func BenchmarkProvider_PersistEvent(b *testing.B) {
	chunk := &messages.RouterChunkAppended{Seq: 7, Chunk: []byte("0123456789abcdef")}
	for _, c := range []struct {
		name  string
		store func() durability.Store
	}{
		{"encode", func() durability.Store { return discard{} }},
		{"memstore", func() durability.Store { return memstore.New(nil) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			store := c.store()
			defer store.Close()
			p, err := durability.NewProvider(store, &durability.ProviderOptions{SnapshotInterval: 1000})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%1000 == 0 && i > 0 { // compact, as a router's snapshots do
					p.DeleteEvents("router", i-1)
				}
				p.PersistEvent("router", i, chunk)
				i++
			}
		})
	}
}

// discardBatches is discard for batches: it checks the batch's parts
// decode as its events and keeps nothing.
type discardBatches struct {
	discard
	parts int
}

func (d *discardBatches) PersistEvents(_ context.Context, _ string, _ uint64, data [][]byte) error {
	d.parts += len(data)
	return nil
}

// TestProvider_PersistEventsCopiesLargeEventsOnce: a batch holding a large
// event (a long streamed argument) is encoded into a buffer made for it at
// once, not grown and copied again as the events are appended: the batch
// costs its own size in allocations, about.
func TestProvider_PersistEventsCopiesLargeEventsOnce(t *testing.T) {
	store := &discardBatches{}
	p := newProvider(t, store, nil)
	big := &messages.LoopArgs{ToolCallId: "call", Chunk: make([]byte, 1<<20)}
	events := []proto.Message{&messages.LoopCallStarted{ToolCallId: "call", Name: "sink"}, big,
		&messages.LoopCallSurfaced{ToolCallId: "call"}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p.PersistEvents("session", 0, events)
	runtime.ReadMemStats(&after)
	if store.parts != len(events) {
		t.Fatalf("the store got %d events, want %d", store.parts, len(events))
	}
	if got, budget := after.TotalAlloc-before.TotalAlloc, uint64(len(big.Chunk))*5/4; got > budget {
		t.Errorf("persisting a batch with a %d-byte event allocated %d bytes, budget %d", len(big.Chunk), got, budget)
	}
}
