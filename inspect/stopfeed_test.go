package inspect_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
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

// TestFeed_SubtreeStopAfterDecisionsIsNoNews: the children of a lead
// fail one by one and are restarted (the failed one alone, or all of
// them), then the lead is stopped with its subtree, round after round:
// every child stops reporting a failure its supervisor decided about,
// and the feed tells no stop; the inspector keeps nothing of the
// actors gone.
func TestFeed_SubtreeStopAfterDecisionsIsNoNews(t *testing.T) {
	for _, kind := range []supervisor.Kind{supervisor.OneForOne, supervisor.AllForOne} {
		t.Run(fmt.Sprint(kind), func(t *testing.T) {
			const children, rounds = 6, 3
			rt, in := inspected(t, nil, nil)
			ctx := testCtx(t)
			strategy := supervisor.MustNew(&supervisor.Options{Kind: kind, MaxRestarts: 2 * children, Within: time.Hour})
			var mu sync.Mutex
			events := make(chan actors.ActorEvent, 4*children)
			var watched map[string]bool // the actors of the round
			// Watched after the inspector: it has seen an event by the
			// time this watcher is called with it.
			t.Cleanup(rt.WatchActors(func(ev actors.ActorEvent) {
				mu.Lock()
				defer mu.Unlock()
				if watched[ev.Actor.ID] {
					events <- ev
				}
			}))
			await := func(what string, match func(actors.ActorEvent) bool) {
				t.Helper()
				for {
					select {
					case ev := <-events:
						if match(ev) {
							return
						}
					case <-ctx.Done():
						t.Fatalf("never saw %s", what)
					}
				}
			}
			for round := range rounds {
				refs := make(chan []actors.Ref, 1)
				lead := actors.Spec{Name: "lead", Supervision: strategy, New: func() actors.Logic {
					return actors.LogicFunc(func(c actors.Context, msg any) {
						if _, ok := msg.(actors.Started); !ok {
							return
						}
						var out []actors.Ref
						for i := range children {
							ref, err := c.Spawn(failingSpec(fmt.Sprintf("tool-%d", i), fmt.Errorf("boom %d of round %d", i, round)))
							if err != nil {
								panic(err)
							}
							out = append(out, ref)
						}
						refs <- out
					})
				}}
				leadRef, err := rt.Spawn(lead)
				if err != nil {
					t.Fatal(err)
				}
				kids := <-refs
				mu.Lock()
				watched = map[string]bool{leadRef.String(): true}
				for _, k := range kids {
					watched[k.String()] = true
				}
				mu.Unlock()
				for i, k := range kids {
					rt.Send(k, messages.Text("s", "fail"))
					await(k.String()+" restarted", func(ev actors.ActorEvent) bool {
						return ev.Actor.ID == k.String() && ev.Actor.State == actors.ActorRunning && ev.Actor.Restarts > 0 &&
							ev.Actor.LastFailure != nil && strings.HasPrefix(ev.Actor.LastFailure.Error(), fmt.Sprintf("boom %d ", i))
					})
				}
				rt.System().Root.Stop(leadRef.PID())
				for range children + 1 {
					await("the lead and its children stopped", func(ev actors.ActorEvent) bool {
						return ev.Actor.State == actors.ActorStopped
					})
				}
			}
			snap := in.Snapshot("")
			for _, it := range snap.Feed {
				if it.Kind == "stop" {
					t.Errorf("feed item %+v: every failure was decided about", it)
				}
			}
			if n := inspect.Remembered(in); n != 0 {
				t.Errorf("the inspector keeps the last failures of %d actors, want none: none is alive", n)
			}
		})
	}
}

// TestFailures_DecisionAfterTheStopKeepsNothing: a supervisor decides
// about a child's failure as the child is stopped by another: the
// decision's event, reported on the supervisor's goroutine, reaches the
// inspector after the child's stop. The inspector keeps nothing of the
// child, gone: what it keeps is of the live actors alone.
func TestFailures_DecisionAfterTheStopKeepsNothing(t *testing.T) {
	boom := errors.New("boom went off")
	rt := actorstest.NewRuntime(t, nil)
	ctx := testCtx(t)
	var child string
	var mu sync.Mutex
	childIs := func(ev actors.ActorEvent) bool {
		mu.Lock()
		defer mu.Unlock()
		return child != "" && ev.Actor.ID == child
	}
	deciding, stopSeen, decidedSeen := make(chan struct{}), make(chan struct{}), make(chan struct{})
	hold := sync.OnceFunc(func() {
		close(deciding)
		select {
		case <-stopSeen:
		case <-ctx.Done():
		}
	})
	// Watched before the inspector: it sees the decision after the stop.
	t.Cleanup(rt.WatchActors(func(ev actors.ActorEvent) {
		if childIs(ev) && ev.Actor.State != actors.ActorStopped && errors.Is(ev.Actor.LastFailure, boom) {
			hold()
		}
	}))
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	seeDecision := sync.OnceFunc(func() { close(decidedSeen) })
	// Watched after the inspector: it has seen an event by then.
	t.Cleanup(rt.WatchActors(func(ev actors.ActorEvent) {
		switch {
		case !childIs(ev):
		case ev.Actor.State == actors.ActorStopped:
			close(stopSeen)
		case errors.Is(ev.Actor.LastFailure, boom):
			seeDecision()
		}
	}))
	refs := make(chan actors.Ref, 1)
	lead := actors.Spec{Name: "lead", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if _, ok := msg.(actors.Started); ok {
				ref, err := c.Spawn(failingSpec("tool-boom", boom))
				if err != nil {
					panic(err)
				}
				refs <- ref
			}
		})
	}}
	if _, err := rt.Spawn(lead); err != nil {
		t.Fatal(err)
	}
	ref := <-refs
	mu.Lock()
	child = ref.String()
	mu.Unlock()
	rt.Send(ref, messages.Text("s", "fail"))
	select {
	case <-deciding:
	case <-ctx.Done():
		t.Fatal("the lead never decided about the child's failure")
	}
	rt.System().Root.Stop(ref.PID())
	select {
	case <-decidedSeen:
	case <-ctx.Done():
		t.Fatal("the inspector never saw the decision")
	}
	var alive []string
	for _, a := range rt.Actors() {
		alive = append(alive, a.ID)
	}
	if kept := inspect.RememberedIDs(in); !slices.Equal(kept, alive) {
		t.Fatalf("the inspector keeps the last failures of %q, want those of the live actors %q", kept, alive)
	}
}

// TestFeed_StopBeforeDecisionOnEveryView: the stop of an actor that
// failed before its supervisor decided is told, an alert, by the page
// (without JavaScript) and by the event stream's view, as by the
// snapshot.
func TestFeed_StopBeforeDecisionOnEveryView(t *testing.T) {
	boom := errors.New("boom went off")
	r := newCrashRig(t, nil, boom)
	ctx := testCtx(t)
	child := r.failChild(ctx, t)
	r.rt.System().Root.Stop(child.PID())
	select {
	case <-r.stopped:
	case <-ctx.Done():
		t.Fatal("the child was never reported stopped")
	}
	defer r.release()
	item := fmt.Sprintf(`<li class="item kind-stop alert" data-kind="stop" data-actor="%s">`, child.String())
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	req.RemoteAddr = "127.0.0.1:1234"
	rec := httptest.NewRecorder()
	r.in.ServeHTTP(rec, req)
	if page := rec.Body.String(); rec.Code != http.StatusOK || strings.Count(page, item) != 1 || !strings.Contains(page, boom.Error()) {
		t.Errorf("GET /: %d, want the page to tell the stop once, an alert (%s), with the failure; the page:\n%s", rec.Code, item, page)
	}
	data, err := inspect.RenderView(r.in, "")
	if err != nil {
		t.Fatal(err)
	}
	var parts map[string]string
	if err := json.Unmarshal(data, &parts); err != nil {
		t.Fatal(err)
	}
	if feed := parts["feed"]; strings.Count(feed, item) != 1 || !strings.Contains(feed, boom.Error()) {
		t.Errorf("the event stream's feed %q, want it to tell the stop once, an alert (%s), with the failure", feed, item)
	}
	if items := failureItems(r.snapshot(t), child.String(), boom.Error()); len(items) != 1 || items[0].Kind != "stop" {
		t.Errorf("the snapshot's feed items telling the failure %+v, want the stop's alone", items)
	}
}
