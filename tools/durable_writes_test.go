package tools_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// writesOf returns how many writes the store gets (events, in one store
// call however many; snapshots) while do runs
// and the bubble then settles.
func writesOf(store *countingStore, do func()) int64 {
	synctest.Wait()
	before := store.writes.Load()
	do()
	synctest.Wait()
	return store.writes.Load() - before
}

// countedWithCall starts a limitedRouter (limit an hour) of kind around
// the model that model makes, on a countingStore, and call_<stream> on
// stream.
func countedWithCall(t *testing.T, kind restartKind, model func(got chan<- *messages.Frame) actors.Spec, stream string) (*limitedRouter, *countingStore) {
	t.Helper()
	store := &countingStore{Store: memstore.New(nil)}
	h := startLimitedOn(t, kind, time.Hour, model, store)
	send(t, h.conn, messages.StreamingToolCall(stream, "call_"+stream, "record"))
	waitState(t, h.conn, stream, "started")
	return h, store
}

// TestDurableRouter_CallStartedOnAClosedStreamIsOneWrite: the start of a
// call the model makes on a closed stream and the time it begins to wait
// there are written together, in one store call; the call still ends at
// its own limit, for good.
func TestDurableRouter_CallStartedOnAClosedStreamIsOneWrite(t *testing.T) {
	bothRestarts(t, func(t *testing.T, kind restartKind) {
		h, store := countedWithCall(t, kind, startModel, "s")
		h.restart("p")
		time.Sleep(h.limit + time.Second)
		results(t, h.got, 1) // call_s, ended at the limit: s stays closed

		if n := writesOf(store, func() { send(t, h.conn, messages.Meta("s", "start", nil)) }); n != 1 {
			t.Errorf("the call started on the closed stream took %d writes, want 1", n)
		}
		time.Sleep(h.limit / 2)
		h.restart("p2")
		time.Sleep(h.limit/2 + time.Second)
		if r := results(t, h.got, 1)[0]; r.GetToolCallId() != "call_m" || tools.KindOf(r) != tools.FailureStopped {
			t.Errorf("result an hour after call_m's start: %s, want call_m stopped", line(r))
		}
	})
}

// TestDurableRouter_RestoreIsOneWrite: a restore frame whose calls go on
// streams the consumer has no call open on is written in one store call,
// the time those calls begin to wait with it: after a restart, they end
// at the limit from the restore.
func TestDurableRouter_RestoreIsOneWrite(t *testing.T) {
	bothRestarts(t, func(t *testing.T, kind restartKind) {
		// A first event (call_o): the snapshot the store gets with it is
		// not the restore's.
		h, store := countedWithCall(t, kind, resultsModel, "o")
		restore, err := tools.RestoreFrame("x", "r1", restoredState("x", "u", "v"))
		if err != nil {
			t.Fatal(err)
		}
		if n := writesOf(store, func() { send(t, h.conn, restore) }); n != 1 {
			t.Errorf("the restore took %d writes, want 1", n)
		}
		waitState(t, h.conn, "x", "restored")
		time.Sleep(h.limit / 2)
		h.restart("p") // the calls of x, u and v are recovered
		time.Sleep(h.limit/2 - time.Second)
		results(t, h.got, 0)
		time.Sleep(2 * time.Second)
		got := results(t, h.got, 2)
		for i, id := range []string{"call_u", "call_v"} {
			if r := got[i]; r.GetToolCallId() != id || tools.KindOf(r) != tools.FailureStopped {
				t.Errorf("result %d an hour after the restore: %s, want %s stopped", i, line(r), id)
			}
		}
	})
}
