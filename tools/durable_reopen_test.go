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
// supervised restart (memstore) and after the process's (bbolt).
func TestDurableRouter_RecoveredCallsEndAfterTheLimit(t *testing.T) {
	for _, process := range []bool{false, true} {
		name := "supervised restart"
		if process {
			name = "process restart"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { recoveredCallsEnd(t, process) })
		})
	}
}

// recoveredCallsEnd is TestDurableRouter_RecoveredCallsEndAfterTheLimit
// inside its bubble, after a process restart or a supervised one.
func recoveredCallsEnd(t *testing.T, process bool) {
	const limit = time.Hour
	got := make(chan *messages.Frame, 16)
	_, tool := newArgsTool(t)
	path := filepath.Join(t.TempDir(), "router.db")
	var (
		store durability.Store = memstore.New(nil)
		rt    *actors.Runtime
		conn  *actors.Conn
	)
	if process {
		var err error
		if store, err = boltstore.Open(path, nil); err != nil {
			t.Fatal(err)
		}
	}
	start := func() {
		t.Helper()
		spec, err := tools.NewStreamingRouter(resultsModel(got), &tools.RouterOptions{Name: "router", Tools: []*tools.Tool{tool},
			Durability: &tools.DurabilityOptions{Store: store, WrapperID: "r1", RecoveredTimeout: limit}})
		if err != nil {
			t.Fatal(err)
		}
		newLogic := spec.New
		spec.New = func() actors.Logic { return crashable{newLogic()} }
		if rt, err = actors.NewRuntime(nil); err != nil {
			t.Fatal(err)
		}
		if conn, err = rt.Start(spec); err != nil {
			t.Fatal(err)
		}
	}
	before := goleak.IgnoreCurrent()
	start()
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		store.Close()
		leakcheck.VerifyNone(t, before)
	})
	// restart restarts the router: its supervisor, or the process (the
	// runtime closed, the file closed and opened again, a new runtime).
	restart := func() {
		t.Helper()
		if !process {
			rt.System().Root.Send(conn.Ref().PID(), crashNow{})
			return
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		var err error
		if store, err = boltstore.Open(path, nil); err != nil {
			t.Fatal(err)
		}
		start()
	}

	send(t, conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	send(t, conn, messages.StreamingToolCall("r", "call_r", "record"))
	waitState(t, conn, "r", "started")
	restart()
	probe(t, conn, "p")
	// The consumer of r comes back: its call waits for its chunks, whatever
	// the limit.
	send(t, conn, messages.Text("r", "back"))
	waitState(t, conn, "r", "recovered")

	time.Sleep(limit - time.Second)
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

	restart()
	probe(t, conn, "p2")
	send(t, conn, messages.Text("s", "again"))
	if out := streamUntil(t, conn, "s", isText("again")); slices.ContainsFunc(out, func(f *messages.Frame) bool {
		return isState(f, "recovered")
	}) {
		t.Errorf("the ended call came back at the next restart: %q", lines(out))
	}
	synctest.Wait()
	if len(got) != 0 {
		t.Errorf("the ended call was answered again: %s", line(<-got))
	}
}

// TestDurableRouter_CancelOfAClosedStream: a CANCEL of a stream that a
// restart closed ends the calls recovered there at once: the model gets
// their cancelled results, the consumer nothing on the closed stream,
// and the end is persisted: the next restart does not recover them.
func TestDurableRouter_CancelOfAClosedStream(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	got := make(chan *messages.Frame, 16)
	_, tool := newArgsTool(t)
	spec, err := tools.NewStreamingRouter(resultsModel(got), &tools.RouterOptions{Name: "router", Tools: []*tools.Tool{tool},
		Durability: &tools.DurabilityOptions{Store: store, WrapperID: "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	newLogic := spec.New
	spec.New = func() actors.Logic { return crashable{newLogic()} }
	rt := runtimeWith(t, nil)
	conn := start(t, rt, spec)
	send(t, conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	waitState(t, conn, "s", "started")
	crash := func() { rt.System().Root.Send(conn.Ref().PID(), crashNow{}) }

	crash()
	probe(t, conn, "p")
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

	crash()
	probe(t, conn, "p2")
	send(t, conn, messages.Text("s", "again"))
	if out := streamUntil(t, conn, "s", isText("again")); slices.ContainsFunc(out, func(f *messages.Frame) bool {
		return isState(f, "recovered")
	}) {
		t.Errorf("the cancelled call came back at the next restart: %q", lines(out))
	}
	if len(got) != 0 {
		t.Errorf("the cancelled call was answered again: %s", line(<-got))
	}
}
