package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// echoModel answers every frame written into it with the same frame: the
// test plays the model through the router's sink, and the router's
// TOOL_RESULTs come back out of it.
func echoModel() actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) { emit(f) })
}

// crashable lets a test make a duplex panic by sending it crashNow.
type crashable struct{ actors.Logic }

type crashNow struct{}

// crashFrame is the META frame name on which a crashable router panics
// when it comes out of its model, in order after the frames before it.
const crashFrame = "test-crash"

func (l crashable) Receive(c actors.Context, msg any) {
	if _, ok := msg.(crashNow); ok {
		panic("test: crash requested")
	}
	if cf, ok := msg.(actors.ChildFrame); ok && cf.Frame.GetType() == messages.FrameType_META && cf.Frame.GetName() == crashFrame {
		panic("test: crash frame")
	}
	l.Logic.Receive(c, msg)
}

func (l crashable) OnFailure(c actors.Context, err error) {
	if h, ok := l.Logic.(actors.FailureHandler); ok {
		h.OnFailure(c, err)
	}
}

// argsTool records the arguments of each call it runs.
type argsTool struct {
	mu   sync.Mutex
	args map[string][]string // tool_call_id is not visible to handlers: keyed by args' "id"
	ran  chan string
}

func newArgsTool(t *testing.T) (*argsTool, *tools.Tool) {
	a := &argsTool{args: map[string][]string{}, ran: make(chan string, 64)}
	tool, err := tools.New(tools.Definition{Name: "record", Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		var v struct{ ID string }
		if err := json.Unmarshal(args, &v); err != nil {
			return nil, err
		}
		a.mu.Lock()
		a.args[v.ID] = append(a.args[v.ID], string(args))
		a.mu.Unlock()
		a.ran <- v.ID
		return map[string]bool{"ok": true}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a, tool
}

func (a *argsTool) got(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.args[id])
}

// runtimeWith starts a runtime with options, closed and leak-checked at
// cleanup.
func runtimeWith(t *testing.T, opts *actors.RuntimeOptions) *actors.Runtime {
	t.Helper()
	before := goleak.IgnoreCurrent()
	rt, err := actors.NewRuntime(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		leakcheck.VerifyNone(t, before)
	})
	return rt
}

func durableRouter(t *testing.T, store durability.Store, tool *tools.Tool, every int) actors.Spec {
	t.Helper()
	spec, err := tools.NewStreamingRouter(echoModel(), &tools.RouterOptions{Name: "router", Tools: []*tools.Tool{tool},
		Durability: &tools.DurabilityOptions{Store: store, WrapperID: "r1", SnapshotEvery: every}})
	if err != nil {
		t.Fatal(err)
	}
	newLogic := spec.New
	spec.New = func() actors.Logic { return crashable{newLogic()} }
	return spec
}

// startMemRouter starts a durable router on a memstore with a recording
// tool, in a runtime closed at cleanup.
func startMemRouter(t *testing.T, every int) (*argsTool, *actors.Runtime, *actors.Conn) {
	t.Helper()
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rec, tool := newArgsTool(t)
	rt := runtimeWith(t, nil)
	conn, err := rt.Start(durableRouter(t, store, tool, every))
	if err != nil {
		t.Fatal(err)
	}
	return rec, rt, conn
}

// stateEvent is a decoded META state frame.
type stateEvent struct {
	Event         string   `json:"event"`
	ToolCallID    string   `json:"tool_call_id"`
	StreamPending int      `json:"stream_pending"`
	Pending       int      `json:"pending"`
	ToolCallIDs   []string `json:"tool_call_ids"`
}

// waitState reads frames until a META state frame with event on stream,
// and returns it with the frames read before it.
func waitState(t *testing.T, conn *actors.Conn, stream, event string) (stateEvent, []*messages.Frame) {
	t.Helper()
	ctx := testCtx(t)
	var seen []*messages.Frame
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("waiting for %s on %s after %q: %v", event, stream, lines(seen), err)
		}
		if f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaState && f.GetStreamId() == stream {
			var ev stateEvent
			if err := json.Unmarshal(f.GetPayload(), &ev); err != nil {
				t.Fatal(err)
			}
			if d := f.GetMeta().GetDurability(); d.GetWrapperId() != "r1" || d.GetWrapperType() != tools.DefaultWrapperType {
				t.Errorf("state frame durability = %v", d)
			}
			if ev.Event == event {
				return ev, seen
			}
		}
		seen = append(seen, f)
	}
}

// untilResults reads frames of stream until it has seen n TOOL_RESULTs and
// an END (the END passes as soon as the calls start; results follow), and
// returns the results and every frame read.
func untilResults(t *testing.T, conn *actors.Conn, stream string, n int) (results, all []*messages.Frame) {
	t.Helper()
	ctx := testCtx(t)
	ended := false
	for len(results) < n || !ended {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("after %q: %v", lines(all), err)
		}
		all = append(all, f)
		if f.GetStreamId() != stream {
			continue
		}
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			results = append(results, f)
		case messages.FrameType_END:
			ended = true
		}
	}
	return results, all
}

const (
	argsA = `{"id":"a","text":"chunked \u00e9 arguments","n":[1,2,3]}`
	argsB = `{"id":"b","x":true}`
)

func send(t *testing.T, conn *actors.Conn, frames ...*messages.Frame) {
	t.Helper()
	if err := conn.SendAll(frames...); err != nil {
		t.Fatal(err)
	}
}

// firstHalf streams two interleaved calls up to the middle of their
// arguments; secondHalf finishes them.
func firstHalf(stream string) []*messages.Frame {
	return []*messages.Frame{
		messages.StreamingToolCall(stream, "call_a", "record"),
		messages.ToolArgChunk(stream, "call_a", argsA[:9]),
		messages.StreamingToolCall(stream, "call_b", "record"),
		messages.ToolArgChunk(stream, "call_a", argsA[9:20]),
		messages.ToolArgChunk(stream, "call_b", argsB[:5]),
	}
}

func secondHalf(stream string) []*messages.Frame {
	return []*messages.Frame{
		messages.ToolArgChunk(stream, "call_b", argsB[5:]),
		messages.ToolArgChunk(stream, "call_a", argsA[20:]),
		messages.ToolComplete(stream, "call_b"),
		messages.ToolComplete(stream, "call_a"),
		messages.End(stream),
	}
}

// TestDurableRouter_RecoversAfterPanic streams half of two calls, makes the
// router panic, streams the rest: each call runs once with byte-identical
// arguments and gets exactly one TOOL_RESULT.
func TestDurableRouter_RecoversAfterPanic(t *testing.T) {
	for _, every := range []int{1, 3, 0} {
		t.Run("snapshot every "+string(rune('0'+every)), func(t *testing.T) {
			rec, rt, conn := startMemRouter(t, every)
			send(t, conn, firstHalf("s")...)
			// A call on another stream: its state frame says the chunks
			// before it were persisted and applied.
			send(t, conn, messages.StreamingToolCall("sync", "call_sync", "record"))
			waitState(t, conn, "sync", "started")

			rt.System().Root.Send(conn.Ref().PID(), crashNow{})
			// The streams open at the crash are closed, and stay so until
			// their consumer writes on them again.
			closedOnce(t, probe(t, conn, "p"), "s", "sync")

			send(t, conn, secondHalf("s")...)
			ev, _ := waitState(t, conn, "s", "recovered")
			if !slices.Equal(ev.ToolCallIDs, []string{"call_a", "call_b"}) || ev.Pending != 4 {
				t.Errorf("recovered state = %+v, want call_a, call_b of 4 pending", ev)
			}
			results, _ := untilResults(t, conn, "s", 2)
			ids := []string{results[0].GetToolCallId(), results[1].GetToolCallId()}
			slices.Sort(ids)
			if !slices.Equal(ids, []string{"call_a", "call_b"}) {
				t.Errorf("results for %v, want one each for call_a and call_b", ids)
			}
			for _, r := range results {
				if r.IsErrorResult() {
					t.Errorf("error result %s", line(r))
				}
			}
			if got := rec.got("a"); !slices.Equal(got, []string{argsA}) {
				t.Errorf("call_a ran with %q, want once with %q", got, argsA)
			}
			if got := rec.got("b"); !slices.Equal(got, []string{argsB}) {
				t.Errorf("call_b ran with %q, want once with %q", got, argsB)
			}
		})
	}
}

// TestDurableRouter_HeldChunksSurviveACrash: the router holds argument
// chunks until something shows; when it panics while holding them (here
// on the frame right after them, with nothing shown since), its
// incarnation writes them as it ends, so the next one, which gets the
// rest of the call, runs it with byte-identical arguments. The chunks cut
// a character in two: they are stored as bytes.
func TestDurableRouter_HeldChunksSurviveACrash(t *testing.T) {
	rec, _, conn := startMemRouter(t, 0)
	args := `{"id":"h","text":"é€ held"}`
	cut := strings.Index(args, "€") + 1 // inside the character
	send(t, conn, messages.StreamingToolCall("s", "call_h", "record"))
	waitState(t, conn, "s", "started")
	send(t, conn, messages.ToolArgChunk("s", "call_h", args[:4]), messages.ToolArgChunk("s", "call_h", args[4:cut]),
		messages.Meta("s", crashFrame, nil))
	streamUntil(t, conn, "s", isEnd) // closed by the crash; what comes next waits for the next incarnation
	send(t, conn, messages.ToolArgChunk("s", "call_h", args[cut:]), messages.ToolComplete("s", "call_h"), messages.End("s"))
	if ev, _ := waitState(t, conn, "s", "recovered"); !slices.Equal(ev.ToolCallIDs, []string{"call_h"}) {
		t.Errorf("recovered %+v", ev)
	}
	results, _ := untilResults(t, conn, "s", 1)
	if results[0].IsErrorResult() {
		t.Errorf("error result %s", line(results[0]))
	}
	if got := rec.got("h"); !slices.Equal(got, []string{args}) {
		t.Errorf("call_h ran with %q, want once with %q", got, args)
	}
}

// writeSignal is a store that reports each write of events (their count)
// once it is durable.
type writeSignal struct {
	durability.Store
	wrote chan int
}

func (s *writeSignal) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	err := s.Store.PersistEvent(ctx, name, index, data)
	s.wrote <- 1
	return err
}

func (s *writeSignal) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	err := s.Store.PersistEvents(ctx, name, first, data)
	s.wrote <- len(data)
	return err
}

// TestDurableRouter_QuietStreamIsWritten: chunks held while nothing else
// happens are written by the router's flush timer, without another frame.
func TestDurableRouter_QuietStreamIsWritten(t *testing.T) {
	store := &writeSignal{Store: memstore.New(nil), wrote: make(chan int, 16)}
	t.Cleanup(func() { store.Close() })
	_, tool := newArgsTool(t)
	rt := runtimeWith(t, nil)
	conn, err := rt.Start(durableRouter(t, store, tool, 0))
	if err != nil {
		t.Fatal(err)
	}
	send(t, conn, messages.StreamingToolCall("s", "call_q", "record"))
	waitState(t, conn, "s", "started")
	if n := <-store.wrote; n != 1 {
		t.Fatalf("the call's start was written with %d events", n)
	}
	send(t, conn, messages.ToolArgChunk("s", "call_q", `{"id":`), messages.ToolArgChunk("s", "call_q", `"q"`))
	ctx := testCtx(t)
	written := 0
	for written < 1 { // both chunks as one event, or one event each
		select {
		case n := <-store.wrote:
			written += n
		case <-ctx.Done():
			t.Fatal("the held chunks were never written")
		}
	}
	var args []byte
	err = store.GetEvents(ctx, conn.Ref().String(), 1, 0, func(_ uint64, data []byte) error {
		p, err := durability.NewProvider(store, nil)
		if err != nil {
			return err
		}
		e, err := p.Decode(data)
		if err != nil {
			return err
		}
		args = append(args, e.(*messages.RouterChunkAppended).GetChunk()...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"q"`; string(args) != want && string(args) != `{"id":` {
		t.Errorf("chunks written: %q, want %q (or its first chunk so far)", args, want)
	}
}

// TestDurableRouter_SurvivesProcessRestart stops everything half-way, closes
// and reopens the bbolt file in a new runtime: the calls complete there.
func TestDurableRouter_SurvivesProcessRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "router.db")
	rec, tool := newArgsTool(t)
	func() {
		store, err := boltstore.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := actors.NewRuntime(nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := rt.Start(durableRouter(t, store, tool, 2))
		if err != nil {
			t.Fatal(err)
		}
		send(t, conn, firstHalf("s")...)
		send(t, conn, messages.StreamingToolCall("sync", "call_sync", "record"))
		waitState(t, conn, "sync", "started")
		if err := rt.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}()

	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rt := runtimeWith(t, nil)
	conn, err := rt.Start(durableRouter(t, store, tool, 2))
	if err != nil {
		t.Fatal(err)
	}
	// The streams the old process had open were closed as it stopped: the
	// router emits nothing on them until their consumer writes on them
	// again, and then the recovered calls are announced first.
	if seen := probe(t, conn, "p"); len(onStream(seen, "s"))+len(onStream(seen, "sync")) != 0 {
		t.Errorf("before the consumer wrote on them again, the recovered streams got %q", lines(seen))
	}
	send(t, conn, secondHalf("s")...)
	if ev, before := waitState(t, conn, "s", "recovered"); !slices.Equal(ev.ToolCallIDs, []string{"call_a", "call_b"}) ||
		len(onStream(before, "s")) != 0 {
		t.Errorf("recovered %+v after %q", ev, lines(before))
	}
	untilResults(t, conn, "s", 2)
	if got := rec.got("a"); !slices.Equal(got, []string{argsA}) {
		t.Errorf("call_a ran with %q, want once with %q", got, argsA)
	}
	if got := rec.got("b"); !slices.Equal(got, []string{argsB}) {
		t.Errorf("call_b ran with %q, want once with %q", got, argsB)
	}
}

// TestDurableRouter_RestoreFrame restores a router from a snapshot held
// elsewhere: the frame is consumed and the restored call completes.
func TestDurableRouter_RestoreFrame(t *testing.T) {
	rec, _, conn := startMemRouter(t, 0)
	state := &messages.RouterState{Calls: []*messages.PendingToolCall{
		{Seq: 1, StreamId: "r", ToolCallId: "call_r", Name: "record", Args: []byte(`{"id":"r",`)},
	}}
	restore, err := tools.RestoreFrame("r", "r1", state)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tools.RestoreFrame("r", "someone-else", &messages.RouterState{})
	if err != nil {
		t.Fatal(err)
	}
	send(t, conn, other, restore)
	ev, seen := waitState(t, conn, "r", "restored")
	if !slices.Equal(ev.ToolCallIDs, []string{"call_r"}) {
		t.Errorf("restored %+v", ev)
	}
	send(t, conn, messages.ToolArgChunk("r", "call_r", `"v":1}`), messages.ToolComplete("r", "call_r"), messages.End("r"))
	_, all := untilResults(t, conn, "r", 1)
	// The frame for another wrapper went through the model and came back;
	// ours was consumed.
	var restores []*messages.Frame
	for _, f := range append(seen, all...) {
		if _, ok := f.RestoreState(); ok {
			restores = append(restores, f)
		}
	}
	if len(restores) != 1 || restores[0].GetMeta().GetDurability().GetWrapperId() != "someone-else" {
		t.Errorf("restore frames that came out: %q, want only the one for someone-else", lines(restores))
	}
	if got := rec.got("r"); !slices.Equal(got, []string{`{"id":"r","v":1}`}) {
		t.Errorf("restored call ran with %q", got)
	}
}

// TestDurableRouter_StoreFailureIsSupervised closes the store mid-stream:
// the supervisor sees the *durability.StoreError and the stream ends with
// ERROR and END instead of losing the chunk silently.
func TestDurableRouter_StoreFailureIsSupervised(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) (durability.Store, func())
	}{
		{"closed memstore", func(t *testing.T) (durability.Store, func()) {
			s := memstore.New(nil)
			return s, func() { s.Close() }
		}},
		{"read-only bbolt", func(t *testing.T) (durability.Store, func()) {
			path := filepath.Join(t.TempDir(), "ro.db")
			s, err := boltstore.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ro, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ro.Close() })
			return ro, func() {}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, breakIt := tc.store(t)
			t.Cleanup(func() { store.Close() })
			_, conn, failures := startWatchedRouter(t, store)
			if tc.name != "read-only bbolt" { // a read-only store fails from the first event
				send(t, conn, messages.StreamingToolCall("sync", "call_sync", "record"))
				waitState(t, conn, "sync", "started") // recovered and running
			}
			breakIt()
			// One frame: its echo is the event whose persisting fails. The
			// router took stream s in when the frame entered its sink, so
			// the failing incarnation closes s with ERROR and END. (A second
			// frame sent here could find the router already stopped: with
			// the store closed, every restart fails to recover and the
			// supervisor stops it within milliseconds.)
			send(t, conn, messages.StreamingToolCall("s", "call_a", "record"))
			closedByStore(t, conn, "s", failures)
		})
	}
}

// TestDurableRouter_HeldChunksStoreFailure: when the write that carries a
// call's held argument chunks fails, the call does not run on what was
// never persisted: its stream is closed with the store's ERROR and END
// (the failure is the answer) and the supervisor sees the store error.
func TestDurableRouter_HeldChunksStoreFailure(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rec, conn, failures := startWatchedRouter(t, store)
	args := `{"id":"h","text":"held"}`
	send(t, conn, messages.StreamingToolCall("s", "call_h", "record"))
	waitState(t, conn, "s", "started")
	send(t, conn, messages.ToolArgChunk("s", "call_h", args[:7]), messages.ToolArgChunk("s", "call_h", args[7:]))
	store.Close()
	send(t, conn, messages.ToolComplete("s", "call_h"))
	for _, f := range closedByStore(t, conn, "s", failures) {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			t.Errorf("a result for a call whose arguments were never persisted: %s", line(f))
		}
	}
	if ran := rec.got("h"); len(ran) != 0 {
		t.Errorf("the tool ran with %q on arguments the store never took", ran)
	}
}

// startWatchedRouter starts a durable router on store with a recording
// tool, in a runtime whose supervision events' reasons go to failures.
func startWatchedRouter(t *testing.T, store durability.Store) (rec *argsTool, conn *actors.Conn, failures <-chan error) {
	t.Helper()
	reasons := make(chan error, 64)
	rt := runtimeWith(t, &actors.RuntimeOptions{OnSupervision: func(e supervisor.Event) {
		reasons <- e.Reason
	}})
	rec, tool := newArgsTool(t)
	conn, err := rt.Start(durableRouter(t, store, tool, 0))
	if err != nil {
		t.Fatal(err)
	}
	return rec, conn, reasons
}

// closedByStore reads stream until its END and checks that the router
// closed it with the store's ERROR and END and that the supervisor saw a
// *durability.StoreError; it returns the stream's frames.
func closedByStore(t *testing.T, conn *actors.Conn, stream string, failures <-chan error) []*messages.Frame {
	t.Helper()
	got, err := conn.RecvStream(testCtx(t), stream)
	if err != nil {
		t.Fatalf("stream %s: %v after %q", stream, err, lines(got))
	}
	if n := len(got); n < 2 || got[n-2].GetType() != messages.FrameType_ERROR ||
		!strings.Contains(got[n-2].GetText(), "persist event") {
		t.Errorf("stream %s = %q, want it closed with the store's ERROR and END", stream, lines(got))
	}
	var se *durability.StoreError
	if reason := <-failures; !errors.As(reason, &se) {
		t.Errorf("supervisor saw %v, want a *durability.StoreError", reason)
	}
	return got
}

func TestDurabilityOptions_Validated(t *testing.T) {
	store := memstore.New(nil)
	defer store.Close()
	for name, o := range map[string]*tools.RouterOptions{
		"nil store":         {Durability: &tools.DurabilityOptions{}},
		"negative interval": {Durability: &tools.DurabilityOptions{Store: store, SnapshotEvery: -1}},
	} {
		if _, err := tools.NewStreamingRouter(echoModel(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := tools.NewLoop(echoModel(), &tools.LoopOptions{RouterOptions: tools.RouterOptions{
		Durability: &tools.DurabilityOptions{Store: store}}}); err == nil {
		t.Error("a loop accepted router durability options")
	}
}

// TestPendingCalls_StateKeepsSeq: chunk events name calls by seq, so a
// restored state must go on numbering where the original did, even when
// the newest call had already completed.
func TestPendingCalls_StateKeepsSeq(t *testing.T) {
	var p tools.PendingCalls
	p.Apply(started("s", "a", "t", 0))
	p.Apply(started("s", "b", "t", 1))
	p.Apply(tools.Event{Kind: tools.EventCallCompleted, StreamID: "s", ToolCallID: "b"})
	chunk(&p, "s", "a", `{"x":`)
	var q tools.PendingCalls
	q.Apply(tools.Event{Kind: tools.EventRestored, State: p.State()})
	p.Apply(started("s", "c", "t", 2))
	q.Apply(started("s", "c", "t", 2))
	ps, _ := p.SeqOf("s", "c")
	qs, ok := q.SeqOf("s", "c")
	if !ok || ps != qs || ps != 3 {
		t.Errorf("seq of c: original %d, restored %d (%v), want 3", ps, qs, ok)
	}
	if !chunk(&q, "s", "c", "1}") || string(q.Snapshot()[1].Args) != "1}" || string(q.Snapshot()[0].Args) != `{"x":` {
		t.Errorf("restored calls: %+v", q.Snapshot())
	}
}
