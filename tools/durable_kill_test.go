package tools_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// killableStore is a store that a test "kills": from kill until revive,
// writes are dropped (and reported done), as the writes a process killed
// with SIGKILL never made. A runtime closed meanwhile thus leaves the
// store as that process would.
type killableStore struct {
	durability.Store
	dead atomic.Bool
	name atomic.Value // of the last events written
}

func (s *killableStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	if s.dead.Load() {
		return nil
	}
	s.name.Store(name)
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *killableStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if s.dead.Load() {
		return nil
	}
	s.name.Store(name)
	return s.Store.PersistEvents(ctx, name, first, data)
}

func (s *killableStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	if s.dead.Load() {
		return nil
	}
	return s.Store.PersistSnapshot(ctx, name, index, data)
}

// kill closes h's runtime as a process killed then would be (nothing it
// writes meanwhile is stored) and starts a new one on the store.
func (h *limitedRouter) kill(s *killableStore, probeStream string) {
	h.t.Helper()
	s.dead.Store(true)
	if err := h.rt.Close(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	s.dead.Store(false)
	h.start()
	probe(h.t, h.conn, probeStream)
}

// startedOnS starts a limitedRouter (limit an hour, restartRuntime) on a
// killableStore, and call_a on stream s.
func startedOnS(t *testing.T) (*limitedRouter, *killableStore) {
	t.Helper()
	store := &killableStore{Store: memstore.New(nil)}
	h := startLimitedOn(t, restartRuntime, time.Hour, resultsModel, store)
	send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
	waitState(t, h.conn, "s", "started")
	return h, store
}

// TestDurableRouter_KilledAfterTheReopenKeepsIt: the consumer writes on
// the closed stream of a recovered call near the end of its limit and is
// told the call waits there; the process is killed before the router
// writes anything else. The next restart closes the stream again, and
// the call waits the whole limit from that restart, as it does after any
// restart of a stream the consumer came back to: it is not ended at
// once for a limit the consumer had met.
func TestDurableRouter_KilledAfterTheReopenKeepsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, store := startedOnS(t)
		h.restart("p")

		time.Sleep(50 * time.Minute)
		send(t, h.conn, messages.Text("s", "back"))
		if out := streamUntil(t, h.conn, "s", isText("back")); !slices.ContainsFunc(out, func(f *messages.Frame) bool { return isState(f, "recovered") }) {
			t.Fatalf("stream s written on again: %q, no recovered state frame", lines(out))
		}
		h.kill(store, "p2")
		time.Sleep(20 * time.Minute)
		results(t, h.got, 0)
		send(t, h.conn, messages.Text("s", "again"))
		if out := streamUntil(t, h.conn, "s", isText("again")); !slices.ContainsFunc(out, func(f *messages.Frame) bool { return isState(f, "recovered") }) {
			t.Errorf("stream s written on after the kill: %q, want call_a recovered", lines(out))
		}
		results(t, h.got, 0)
	})
}

// closedBehind restarts h (a restartRuntime router on store) with a
// RouterStreamClosed of stream at at written into the store meanwhile,
// as a state stored elsewhere or by hand would hold.
func (h *limitedRouter) closedBehind(store *killableStore, stream string, at int64) {
	h.t.Helper()
	if err := h.rt.Close(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	ctx, name := context.Background(), store.name.Load().(string)
	var next uint64
	if err := store.GetEvents(ctx, name, 0, 0, func(i uint64, _ []byte) error { next = i + 1; return nil }); err != nil {
		h.t.Fatal(err)
	}
	a, err := anypb.New(&messages.RouterStreamClosed{StreamId: stream, ClosedAt: at})
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := proto.Marshal(a)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := store.PersistEvent(ctx, name, next, b); err != nil {
		h.t.Fatal(err)
	}
	h.start()
	probe(h.t, h.conn, "p")
}

// TestDurableRouter_ClosedTimeZeroIsNone: a stored closed time of zero
// (the field left unset, by a state written by hand or by another tool)
// is no time: the calls of its stream wait from the recovery that loads
// it, as those of a state stored before closed times, and are ended at
// the limit instead of pending for ever.
func TestDurableRouter_ClosedTimeZeroIsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, store := startedOnS(t)
		h.closedBehind(store, "s", 0)

		time.Sleep(h.limit - time.Second)
		results(t, h.got, 0)
		time.Sleep(2 * time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" {
			t.Errorf("result at the limit: %s, want call_a's", line(r))
		}
	})
}

// TestDurableRouter_ClosedTimeAheadOfTheClock: a closed time ahead of the
// wall clock (set back since, say reset at a reboot) is taken for the
// time the router finds it: the calls of its stream wait the limit from
// then, not the years until the clock catches up, and the new time is
// persisted, so a restart does not put it off.
func TestDurableRouter_ClosedTimeAheadOfTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, store := startedOnS(t)
		h.closedBehind(store, "s", time.Now().AddDate(10, 0, 0).UnixNano())

		time.Sleep(h.limit / 2)
		h.restart("p2")
		time.Sleep(h.limit/2 - time.Second)
		results(t, h.got, 0)
		time.Sleep(2 * time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_a" {
			t.Errorf("result an hour after the closed time was found ahead: %s, want call_a's", line(r))
		}
	})
}
