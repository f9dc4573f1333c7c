package inspect_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
)

// failingSpec is a duplex that fails with err on every frame it gets.
func failingSpec(name string, err error) actors.Spec {
	return actors.Spec{Name: name, New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if _, ok := msg.(*messages.Frame); ok {
				c.Fail(err)
			}
		})
	}}
}

// watchFor returns a channel closed at the first event of the runtime
// that match reports, and stops watching when the test ends.
func watchFor(t *testing.T, rt *actors.Runtime, match func(actors.ActorEvent) bool) <-chan struct{} {
	t.Helper()
	seen := make(chan struct{})
	once := sync.OnceFunc(func() { close(seen) })
	t.Cleanup(rt.WatchActors(func(ev actors.ActorEvent) {
		if match(ev) {
			once()
		}
	}))
	return seen
}

// TestFeed_StopWhileTheInspectorStartsIsNoNews: an actor that failed
// and was restarted before the inspector was made, and stops while the
// inspector starts (watching already, the actors alive not read yet),
// reports the old failure its supervisor decided about: its stop is no
// news, and the feed tells nothing of it.
func TestFeed_StopWhileTheInspectorStartsIsNoNews(t *testing.T) {
	old := errors.New("an old failure")
	rt := actorstest.NewRuntime(t, nil)
	ctx := testCtx(t)
	ref, err := rt.Spawn(failingSpec("worker", old))
	if err != nil {
		t.Fatal(err)
	}
	id := ref.String()
	restarted := watchFor(t, rt, func(ev actors.ActorEvent) bool {
		return ev.Actor.ID == id && ev.Actor.State == actors.ActorRunning && ev.Actor.Restarts == 1
	})
	rt.Send(ref, messages.Text("s", "fail"))
	select {
	case <-restarted:
	case <-ctx.Done():
		t.Fatal("the worker was never restarted")
	}
	in, err := inspect.NewWatching(rt, nil, func() {
		// Watched after the inspector: it has seen the stop by then.
		stopped := watchFor(t, rt, func(ev actors.ActorEvent) bool {
			return ev.Actor.ID == id && ev.Actor.State == actors.ActorStopped
		})
		rt.System().Root.Stop(ref.PID())
		select {
		case <-stopped:
		case <-ctx.Done():
			t.Fatal("the worker was never reported stopped")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	snap := in.Snapshot("")
	if items := failureItems(snap, id, old.Error()); len(items) != 0 {
		t.Fatalf("feed items telling the worker's old failure %+v, want none; the feed: %+v", items, snap.Feed)
	}
	if n := inspect.Remembered(in); n != 0 {
		t.Errorf("the inspector keeps the last failures of %d actors, want none: none is alive", n)
	}
}
