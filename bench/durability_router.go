package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// Streaming-router durability figures: argument chunks per second through
// a streaming router with durability off, in memory, and on bbolt (1 and
// 64 concurrent router sessions), and the time for a durable router to
// recover 10 000 pending calls. One op is one argument chunk (or, for
// recovery, one recovery).

// routerChunks is the number of argument chunks of one streamed call, and
// routerChunk one chunk (about what a model streams per delta).
const (
	routerChunks = 256
	routerChunk  = "0123456789abcdef"
)

// routerDurability says where a benchmarked router persists.
type routerDurability int

const (
	durabilityOff routerDurability = iota
	durabilityMem
	durabilityBolt
)

// chunkSource stands in for a model adapter: each END written into it
// (a request) is answered on the same stream with one streaming call of
// routerChunks chunks, its tool_complete and END. The frames are built
// once and shared (frames are immutable once sent).
func chunkSource(stream string) actors.Spec {
	doc := `{"data":"` + strings.Repeat(routerChunk, routerChunks-1) + `"}`
	// Cut doc into routerChunks pieces: 8 + 16*(n-1) + 2 bytes.
	pieces := []string{doc[:9]}
	for rest := doc[9:]; len(rest) > 0; {
		n := min(len(rest), len(routerChunk))
		if len(pieces) == routerChunks-1 {
			n = len(rest)
		}
		pieces = append(pieces, rest[:n])
		rest = rest[n:]
	}
	frames := []*messages.Frame{messages.StreamingToolCall(stream, "call", "sink")}
	for _, p := range pieces {
		frames = append(frames, messages.ToolArgChunk(stream, "call", p))
	}
	frames = append(frames, messages.ToolComplete(stream, "call"), messages.End(stream))
	return actors.Duplex("source", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() != messages.FrameType_END {
			return // the router's TOOL_RESULTs
		}
		for _, out := range frames {
			emit(out)
		}
	})
}

// sinkTool accepts the streamed arguments; Sync, so that the figure is the
// router's and not a tool actor's.
var sinkTool = tools.MustNewTyped(tools.Definition{Name: "sink", Sync: true},
	func(_ context.Context, in struct {
		Data string `json:"data"`
	}) (struct{}, error) {
		if len(in.Data) == 0 {
			return struct{}{}, fmt.Errorf("no data")
		}
		return struct{}{}, nil
	})

// routerSession is one router with its source, driven from a Conn.
type routerSession struct {
	conn   *actors.Conn
	stream string
	end    *messages.Frame
}

func newRouterSession(rt *actors.Runtime, name string, store durability.Store) (*routerSession, error) {
	opts := &tools.RouterOptions{Name: name, Tools: []*tools.Tool{sinkTool}}
	if store != nil {
		opts.Durability = &tools.DurabilityOptions{Store: store}
	}
	spec, err := tools.NewStreamingRouter(chunkSource("s"), opts)
	if err != nil {
		return nil, err
	}
	conn, err := rt.Start(spec)
	if err != nil {
		return nil, err
	}
	return &routerSession{conn: conn, stream: "s", end: messages.End("s")}, nil
}

// newRouterSessions starts n router sessions on rt, named router-0 on,
// persisting in store (nil: durability off).
func newRouterSessions(rt *actors.Runtime, n int, store durability.Store) ([]*routerSession, error) {
	all := make([]*routerSession, n)
	for i := range all {
		var err error
		if all[i], err = newRouterSession(rt, fmt.Sprintf("router-%d", i), store); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// call streams one call through the router and waits for its END.
func (rs *routerSession) call(ctx context.Context) error {
	if err := rs.conn.Send(rs.end); err != nil {
		return err
	}
	for {
		f, err := rs.conn.Recv(ctx)
		if err != nil {
			return err
		}
		switch f.GetType() {
		case messages.FrameType_END:
			return nil
		case messages.FrameType_TOOL_RESULT, messages.FrameType_ERROR:
			return fmt.Errorf("router passed %s", messages.Format(f))
		}
	}
}

// benchRouterChunks reports argument chunks per second through streaming
// routers: sessions routers at once, each streaming calls of routerChunks
// chunks one after the other, persisting as where says.
func benchRouterChunks(b *testing.B, where routerDurability, sessions int) {
	var open storeOpener
	switch where {
	case durabilityMem:
		open = openMem
	case durabilityBolt:
		open = openBolt(nil)
	}
	benchRouterChunksOn(b, open, sessions)
}

// benchRouterChunksOn is benchRouterChunks on the store open makes (nil:
// durability off).
func benchRouterChunksOn(b *testing.B, open storeOpener, sessions int) {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		b.Fatal(err)
	}
	var store durability.Store
	if open != nil {
		store = open(b)
	}
	defer func() {
		rt.Close(context.Background())
		if store != nil {
			store.Close()
		}
	}()
	all, err := newRouterSessions(rt, sessions, store)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Warm up (actors started, stores ready) all sessions at once: one after
	// the other, 64 sessions on bbolt would pay a commit per chunk each and
	// take longer than the measurement.
	if err := callAll(ctx, all, 1); err != nil {
		b.Fatal(err)
	}
	perSession := max(1, (b.N+routerChunks*sessions-1)/(routerChunks*sessions))
	b.ReportAllocs()
	b.ResetTimer()
	err = callAll(ctx, all, perSession)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	chunks := float64(perSession * sessions * routerChunks)
	b.ReportMetric(chunks/b.Elapsed().Seconds(), "chunks/s")
}

// callAll has every session stream calls calls at once and returns the
// first error.
func callAll(ctx context.Context, all []*routerSession, calls int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(all))
	for _, rs := range all {
		wg.Go(func() {
			for range calls {
				if err := rs.call(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// recoveryCalls is the number of pending calls the recovery benchmark
// recovers, over recoveryStreams streams.
const (
	recoveryCalls   = 10_000
	recoveryStreams = 100
)

// fillRouterRecovery writes the store of a durable router named name as it
// stands with recoveryCalls pending calls at the worst point of its
// snapshot cycle: a snapshot of all but SnapshotEvery-1 calls, then
// the events that started the others (each call holds 48 bytes of
// arguments).
func fillRouterRecovery(store durability.Store, name string) error {
	p, err := durability.NewProvider(store, nil)
	if err != nil {
		return err
	}
	tail := tools.DefaultSnapshotEvery - 1
	state := &messages.RouterState{}
	args := []byte(`{"path":"src/some/file.go","content":"package`)
	for i := range recoveryCalls - tail {
		state.Calls = append(state.Calls, &messages.PendingToolCall{Seq: uint64(i + 1),
			StreamId: fmt.Sprintf("s%d", i%recoveryStreams), ToolCallId: fmt.Sprintf("call_%d", i),
			Name: "sink", Args: args})
	}
	index := 2 * (recoveryCalls - tail)
	p.PersistSnapshot(name, index, state)
	for i := recoveryCalls - tail; i < recoveryCalls; i++ {
		p.PersistEvent(name, index, &messages.RouterCallStarted{StreamId: fmt.Sprintf("s%d", i%recoveryStreams),
			ToolCallId: fmt.Sprintf("call_%d", i), Name: "sink"})
		index++
	}
	return nil
}

// benchRouterRecovery reports the time for a durable router on bbolt to
// start and recover recoveryCalls pending calls: from Start until it has
// announced them all, each stream's once its consumer wrote on it again.
func benchRouterRecovery(b *testing.B) {
	benchRouterRecoveryOn(b, func(b *testing.B) durability.Store {
		store, err := boltstore.Open(filepath.Join(b.TempDir(), "recover.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		return store
	})
}

// benchRouterRecoveryOn is benchRouterRecovery on the store open makes.
func benchRouterRecoveryOn(b *testing.B, open storeOpener) {
	store := open(b)
	defer store.Close()
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec, err := recoveryRouter(ctx, rt, store)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		conn, err := recoverRouter(ctx, rt, spec)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := conn.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// recoveryRouter returns the spec of a durable router on store, and
// fills store with recoveryCalls pending calls of that router
// (fillRouterRecovery) for each start of the spec to recover.
func recoveryRouter(ctx context.Context, rt *actors.Runtime, store durability.Store) (actors.Spec, error) {
	spec, err := recoverySpec(store)
	if err != nil {
		return actors.Spec{}, err
	}
	// The persistence key is the router's actor id (its path of names):
	// start it once, empty, to learn it.
	conn, err := rt.Start(spec)
	if err != nil {
		return actors.Spec{}, err
	}
	key := conn.Ref().String()
	if err := conn.Close(ctx); err != nil {
		return actors.Spec{}, err
	}
	return spec, fillRouterRecovery(store, key)
}

// recoverySpec is the spec of the durable router that the recovery rows
// recover, persisting in store.
func recoverySpec(store durability.Store) (actors.Spec, error) {
	return tools.NewStreamingRouter(chunkSource("probe"), &tools.RouterOptions{Name: "router",
		Tools: []*tools.Tool{sinkTool}, Durability: &tools.DurabilityOptions{Store: store}})
}

// recoverRouter starts the router of spec and returns its connection
// once the router has recovered and announced all recoveryCalls pending
// calls, having written a frame on each of their recoveryStreams streams
// (a recovered router announces a stream's calls when its consumer comes
// back to it).
func recoverRouter(ctx context.Context, rt *actors.Runtime, spec actors.Spec) (*actors.Conn, error) {
	conn, err := rt.Start(spec)
	if err != nil {
		return nil, err
	}
	// After its recovery the router keeps the streams its restart closed
	// silent until their consumer writes on them again; it then announces
	// the pending calls of each in a META state frame.
	for i := range recoveryStreams {
		if err := conn.Send(messages.Text(fmt.Sprintf("s%d", i), "")); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("reopening the router's streams: %w", err)
		}
	}
	for recovered := 0; recovered < recoveryCalls; {
		f, err := conn.Recv(ctx)
		if err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("recovering the router: %w", err)
		}
		if f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaState {
			var ev struct {
				StreamPending int `json:"stream_pending"`
			}
			if err := json.Unmarshal(f.GetPayload(), &ev); err != nil {
				conn.Close(ctx)
				return nil, fmt.Errorf("the router's state frame: %w", err)
			}
			recovered += ev.StreamPending
		}
	}
	return conn, nil
}

// routerSliceCalls is how many calls of routerChunks chunks one side of
// the interleaved in-memory-vs-off row streams in a turn (about 10 ms).
const routerSliceCalls = 64

// routerMemVsOff is the in-memory-vs-off row's interleaved run: two
// routers, each on a runtime of its own, [0] persisting to an in-memory
// store and [1] with durability off, stream routerSliceCalls calls in
// turn (each pair's order drawn at random, see runPairs), so that the machine's load
// drifting during a round falls on both sides alike. Items are chunks.
func routerMemVsOff(b *testing.B, until time.Duration) abTotals {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var slices [2]func() (int, error)
	for i, store := range []durability.Store{openMem(b), nil} {
		rt, err := actors.NewRuntime(nil)
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(context.Background())
		if store != nil {
			defer store.Close()
		}
		rs, err := newRouterSession(rt, "router", store)
		if err != nil {
			b.Fatal(err)
		}
		if err := rs.call(ctx); err != nil { // warm up: actors started, store ready
			b.Fatal(err)
		}
		slices[i] = func() (int, error) {
			for range routerSliceCalls {
				if err := rs.call(ctx); err != nil {
					return 0, err
				}
			}
			return routerSliceCalls * routerChunks, nil
		}
	}
	b.StartTimer()
	return runPairs(b, slices, until)
}
