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
)

// killableStore is a store that a test "kills": from kill until revive,
// writes are dropped (and reported done), as the writes a process killed
// with SIGKILL never made. A runtime closed meanwhile thus leaves the
// store as that process would.
type killableStore struct {
	durability.Store
	dead atomic.Bool
}

func (s *killableStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	if s.dead.Load() {
		return nil
	}
	return s.Store.PersistEvent(ctx, name, index, data)
}

func (s *killableStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	if s.dead.Load() {
		return nil
	}
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

// TestDurableRouter_KilledAfterTheReopenKeepsIt: the consumer writes on
// the closed stream of a recovered call near the end of its limit and is
// told the call waits there; the process is killed before the router
// writes anything else. The next restart closes the stream again, and
// the call waits the whole limit from that restart, as it does after any
// restart of a stream the consumer came back to: it is not ended at
// once for a limit the consumer had met.
func TestDurableRouter_KilledAfterTheReopenKeepsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &killableStore{Store: memstore.New(nil)}
		h := startLimitedOn(t, restartRuntime, time.Hour, resultsModel, store)
		send(t, h.conn, messages.StreamingToolCall("s", "call_a", "record"), messages.ToolArgChunk("s", "call_a", argsA[:9]))
		waitState(t, h.conn, "s", "started")
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
