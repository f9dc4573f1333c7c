package tools_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// onStream returns the frames of frames on stream.
func onStream(frames []*messages.Frame, stream string) []*messages.Frame {
	var out []*messages.Frame
	for _, f := range frames {
		if f.GetStreamId() == stream {
			out = append(out, f)
		}
	}
	return out
}

// typesOf returns the types of frames, in order.
func typesOf(frames []*messages.Frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.GetType().String()
	}
	return out
}

// isState reports whether f is a state frame of event.
func isState(f *messages.Frame, event string) bool {
	return f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaState &&
		strings.Contains(string(f.GetPayload()), `"event":"`+event+`"`)
}

// probe starts a call on a new stream and returns what the router emitted
// before that call's state frame: once the router is back from a
// restart, everything its restart and its recovery emitted.
func probe(t *testing.T, conn *actors.Conn, stream string) []*messages.Frame {
	t.Helper()
	send(t, conn, messages.StreamingToolCall(stream, "call_"+stream, "record"))
	_, seen := waitState(t, conn, stream, "started")
	return seen
}

// closedOnce checks that the restart closed each of streams with ERROR and
// END, and that nothing came on them after.
func closedOnce(t *testing.T, seen []*messages.Frame, streams ...string) {
	t.Helper()
	for _, s := range streams {
		if got := onStream(seen, s); !slices.Equal(typesOf(got), []string{"ERROR", "END"}) {
			t.Errorf("stream %s after the restart: %q, want ERROR and END, nothing after", s, lines(got))
		}
	}
}

// TestDurableRouter_RecoveredStreamWaitsForItsConsumer: a restart closes
// the streams of the calls it then recovers (ERROR, END). The router
// emits nothing more on such a stream until the consumer writes on it
// again: then it announces the calls recovered there, first, and they
// complete. A stream nobody writes on again stays silent.
func TestDurableRouter_RecoveredStreamWaitsForItsConsumer(t *testing.T) {
	rec, rt, conn := startMemRouter(t, 0)
	send(t, conn, firstHalf("s")...)
	send(t, conn, messages.StreamingToolCall("keep", "call_k", "record"))
	waitState(t, conn, "keep", "started")

	rt.System().Root.Send(conn.Ref().PID(), crashNow{})
	closedOnce(t, probe(t, conn, "p"), "s", "keep")

	send(t, conn, secondHalf("s")...)
	ev, before := waitState(t, conn, "s", "recovered")
	if got := onStream(before, "s"); len(got) != 0 {
		t.Errorf("before the recovered state frame, stream s had %q", lines(got))
	}
	if !slices.Equal(ev.ToolCallIDs, []string{"call_a", "call_b"}) || ev.StreamPending != 2 || ev.Pending != 4 {
		t.Errorf("recovered state = %+v, want call_a, call_b of 4 pending", ev)
	}
	results, _ := untilResults(t, conn, "s", 2)
	for _, r := range results {
		if r.IsErrorResult() {
			t.Errorf("error result %s", line(r))
		}
	}
	if got := rec.got("a"); !slices.Equal(got, []string{argsA}) {
		t.Errorf("call_a ran with %q, want once with %q", got, argsA)
	}
	if got := onStream(probe(t, conn, "q"), "keep"); len(got) != 0 {
		t.Errorf("stream keep, never written on again, got %q", lines(got))
	}
}

// resultsModel is echoModel that also hands each TOOL_RESULT written into
// it to got: the router answers a call into its model.
func resultsModel(got chan<- *messages.Frame) actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TOOL_RESULT {
			got <- f
		}
		emit(f)
	})
}

// TestDurableRouter_RecoveredCallsEndAfterTheLimit: a recovered call whose
// stream the consumer does not write on again within RecoveredTimeout is
// ended: its model gets its error result (kind stopped) once, the
// consumer nothing on the closed stream, and its end is persisted, so the
// next restart does not recover it (the stream written on again shows no
// recovered call). Before the limit, the call waits; a call whose stream
// was written on again is not ended at the limit. Both after a
// supervised restart and after the runtime's (see bothRestarts).
func TestDurableRouter_RecoveredCallsEndAfterTheLimit(t *testing.T) {
	bothRestarts(t, recoveredCallsEnd)
}

// TestDurableRouter_RecoveredCallsEndForGoodInAFile: the end of a
// recovered call at its limit is in the bbolt file: the next process
// does not recover it. (bbolt stays out of synctest bubbles: it keeps
// channels in a sync.Pool, which a bubble must not share.)
func TestDurableRouter_RecoveredCallsEndForGoodInAFile(t *testing.T) {
	h := startLimited(t, restartProcess, time.Millisecond)
	send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	waitState(t, h.conn, "s", "started")
	h.restart("p") // call_a is recovered, and its stream closed
	if r := nextResult(t, h.got); r.GetToolCallId() != "call_a" || tools.KindOf(r) != tools.FailureStopped {
		t.Fatalf("result %s, want call_a stopped", line(r))
	}
	h.restart("p2") // call_p is recovered, and its stream closed
	notRecovered(t, h.conn, "s")
	// Had call_a come back, it would have been ended with call_p, before it.
	if r := nextResult(t, h.got); r.GetToolCallId() != "call_p" {
		t.Errorf("result %s, want call_p's alone", line(r))
	}
}

// nextResult waits for the next TOOL_RESULT written into the model.
func nextResult(t *testing.T, got <-chan *messages.Frame) *messages.Frame {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-testCtx(t).Done():
		t.Fatal("no result came")
		return nil
	}
}

// restartKind is how a limitedRouter restarts.
type restartKind int

const (
	restartSupervised restartKind = iota // its supervisor restarts it (crashNow)
	restartRuntime                       // its runtime is closed and a new one started, on the same memstore
	restartProcess                       // as restartRuntime, and the bbolt file closed and opened again
)

// limitedRouter is a durable router named "router" (WrapperID r1) around
// resultsModel, with one tool (record) and RecoveredTimeout limit, that a
// test restarts as kind says. got has the TOOL_RESULTs written into the
// model.
type limitedRouter struct {
	t     *testing.T
	kind  restartKind
	limit time.Duration
	path  string
	tool  *tools.Tool
	got   chan *messages.Frame
	store durability.Store
	rt    *actors.Runtime
	conn  *actors.Conn
	// model makes the model of each start: resultsModel unless set.
	model func(got chan<- *messages.Frame) actors.Spec
	// every is the router's SnapshotEvery from the next start on.
	every int
}

// startLimited starts a limitedRouter, closed at cleanup, after which no
// goroutine may be left.
func startLimited(t *testing.T, kind restartKind, limit time.Duration) *limitedRouter {
	t.Helper()
	return startLimitedWith(t, kind, limit, resultsModel)
}

// startLimitedWith is startLimited with the model that model makes.
func startLimitedWith(t *testing.T, kind restartKind, limit time.Duration, model func(got chan<- *messages.Frame) actors.Spec) *limitedRouter {
	t.Helper()
	return startLimitedOn(t, kind, limit, model, memstore.New(nil))
}

// startLimitedOn is startLimitedWith on store (restartProcess opens a
// bbolt file instead).
func startLimitedOn(t *testing.T, kind restartKind, limit time.Duration, model func(got chan<- *messages.Frame) actors.Spec, store durability.Store) *limitedRouter {
	t.Helper()
	_, tool := newArgsTool(t)
	return startLimitedTool(t, kind, limit, model, store, tool)
}

// startLimitedTool is startLimitedOn with tool for its record tool.
func startLimitedTool(t *testing.T, kind restartKind, limit time.Duration, model func(got chan<- *messages.Frame) actors.Spec, store durability.Store, tool *tools.Tool) *limitedRouter {
	t.Helper()
	h := &limitedRouter{t: t, kind: kind, limit: limit, got: make(chan *messages.Frame, 16),
		path: filepath.Join(t.TempDir(), "router.db"), store: store, model: model, tool: tool}
	if kind == restartProcess {
		h.open()
	}
	before := goleak.IgnoreCurrent()
	h.start()
	t.Cleanup(func() {
		if err := h.rt.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		h.store.Close()
		leakcheck.VerifyNone(t, before)
	})
	return h
}

func (h *limitedRouter) open() {
	h.t.Helper()
	var err error
	if h.store, err = boltstore.Open(h.path, nil); err != nil {
		h.t.Fatal(err)
	}
}

func (h *limitedRouter) start() {
	h.t.Helper()
	spec, err := tools.NewStreamingRouter(h.model(h.got), &tools.RouterOptions{Name: "router", Tools: []*tools.Tool{h.tool},
		Durability: &tools.DurabilityOptions{Store: h.store, WrapperID: "r1", RecoveredTimeout: h.limit, SnapshotEvery: h.every}})
	if err != nil {
		h.t.Fatal(err)
	}
	newLogic := spec.New
	spec.New = func() actors.Logic { return crashable{newLogic()} }
	if h.rt, err = actors.NewRuntime(nil); err != nil {
		h.t.Fatal(err)
	}
	if h.conn, err = h.rt.Start(spec); err != nil {
		h.t.Fatal(err)
	}
}

// restart restarts the router and waits until it is back (see probe).
func (h *limitedRouter) restart(probeStream string) []*messages.Frame {
	h.t.Helper()
	if h.kind == restartSupervised {
		h.rt.System().Root.Send(h.conn.Ref().PID(), crashNow{})
		return probe(h.t, h.conn, probeStream)
	}
	if err := h.rt.Close(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	if h.kind == restartProcess {
		if err := h.store.Close(); err != nil {
			h.t.Fatal(err)
		}
		h.open()
	}
	h.start()
	return probe(h.t, h.conn, probeStream)
}

// recoveredCallsEnd is TestDurableRouter_RecoveredCallsEndAfterTheLimit
// inside its bubble.
func recoveredCallsEnd(t *testing.T, kind restartKind) {
	h := startLimited(t, kind, time.Hour)
	conn, got := h.conn, h.got
	send(t, conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	send(t, conn, messages.StreamingToolCall("r", "call_r", "record"))
	waitState(t, conn, "r", "started")
	h.restart("p")
	conn = h.conn
	// The consumer of r comes back: its call waits for its chunks, whatever
	// the limit.
	send(t, conn, messages.Text("r", "back"))
	waitState(t, conn, "r", "recovered")

	time.Sleep(h.limit - time.Second)
	synctest.Wait()
	if len(got) != 0 {
		t.Fatalf("before the limit, the model got %s", line(<-got))
	}
	time.Sleep(2 * time.Second)
	synctest.Wait()
	if len(got) != 1 {
		t.Fatalf("after the limit, the model got %d results, want 1", len(got))
	}
	r := <-got
	if r.GetToolCallId() != "call_a" || tools.KindOf(r) != tools.FailureStopped ||
		!strings.Contains(string(r.GetPayload()), "not written on again within 1h0m0s") {
		t.Errorf("result at the limit: %s, want call_a stopped, saying why", line(r))
	}
	if s := onStream(probe(t, conn, "q"), "s"); len(s) != 0 {
		t.Errorf("the closed stream s got %q", lines(s))
	}

	h.restart("p2")
	notRecovered(t, h.conn, "s")
	synctest.Wait()
	if len(got) != 0 {
		t.Errorf("the ended call was answered again: %s", line(<-got))
	}
}

// notRecovered writes on stream and checks that no call is announced
// there before the model echoes what was written.
func notRecovered(t *testing.T, conn *actors.Conn, stream string) {
	t.Helper()
	send(t, conn, messages.Text(stream, "again"))
	if out := streamUntil(t, conn, stream, isText("again")); slices.ContainsFunc(out, func(f *messages.Frame) bool {
		return f.GetType() == messages.FrameType_META && f.GetName() == tools.MetaState
	}) {
		t.Errorf("an ended call came back on %s: %q", stream, lines(out))
	}
}

// TestDurableRouter_CancelOfAClosedStream: a CANCEL of a stream that a
// restart closed ends the calls recovered there at once: the model gets
// their cancelled results, the consumer nothing on the closed stream,
// and the end is persisted: the next restart does not recover them.
func TestDurableRouter_CancelOfAClosedStream(t *testing.T) {
	h := startLimited(t, restartSupervised, 0)
	conn, got := h.conn, h.got
	send(t, conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	waitState(t, conn, "s", "started")

	h.restart("p")
	send(t, conn, messages.Cancel("s", ""))
	select {
	case r := <-got:
		if r.GetToolCallId() != "call_a" || tools.KindOf(r) != tools.FailureCancelled {
			t.Errorf("result %s, want call_a cancelled", line(r))
		}
	case <-testCtx(t).Done():
		t.Fatal("the cancelled call got no result")
	}
	// The CANCEL and the result come back out of the model on s: they
	// do not go out on the closed stream.
	if out := onStream(probe(t, conn, "q"), "s"); len(out) != 0 {
		t.Errorf("the closed stream s got %q", lines(out))
	}

	h.restart("p2")
	notRecovered(t, conn, "s")
	if len(got) != 0 {
		t.Errorf("the cancelled call was answered again: %s", line(<-got))
	}
}
