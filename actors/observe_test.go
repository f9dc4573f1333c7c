package actors_test

import (
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// parentOf is a duplex that spawns upper() as its child and forwards
// frames to it.
func parentOf() actors.Spec {
	return actors.Wrap("outer", upper(), func() actors.Wrapped { return actors.Hooks{} })
}

func TestRuntime_WatchActorsAndInjectPanic(t *testing.T) {
	rt := newRuntime(t, nil)
	events := make(chan actors.ActorEvent, 64)
	stopWatch := rt.WatchActors(func(ev actors.ActorEvent) { events <- ev })
	defer stopWatch()
	decisions := make(chan supervisor.Event, 8)
	defer rt.WatchSupervision(func(ev supervisor.Event) { decisions <- ev })()

	conn, err := rt.Start(parentOf())
	if err != nil {
		t.Fatal(err)
	}
	// A round trip: both actors are up.
	if err := conn.SendAll(messages.Text("s", "a"), messages.End("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(testCtx(t), "s"); err != nil {
		t.Fatal(err)
	}
	list := rt.Actors()
	if len(list) != 2 {
		t.Fatalf("Actors() = %+v, want the wrapper and its inner duplex", list)
	}
	outer, inner := list[0], list[1]
	if outer.Parent != rt.Host().Id || inner.Parent != outer.ID || inner.Name != "upper" || outer.Name != "outer" {
		t.Fatalf("tree: %+v", list)
	}
	if outer.State != actors.ActorRunning || inner.State != actors.ActorRunning || inner.Restarts != 0 {
		t.Fatalf("states: %+v", list)
	}
	for range 2 {
		<-events // the two starts
	}

	if err := rt.InjectPanic(inner.ID, "injected by the test"); err != nil {
		t.Fatal(err)
	}
	ev := <-decisions
	if ev.Child != inner.ID || ev.Directive != supervisor.Restart {
		t.Fatalf("decision %+v", ev)
	}
	var pe *actors.PanicError
	if !errors.As(ev.Reason, &pe) || pe.Value != "injected by the test" {
		t.Fatalf("reason %v, want the injected panic", ev.Reason)
	}
	// The child reports its failure (from its supervisor's decision), its
	// restart and its new incarnation.
	var states []actors.ActorState
	for {
		ev := <-events
		if ev.Actor.ID != inner.ID {
			continue
		}
		states = append(states, ev.Actor.State)
		// The decision is reported before it is carried out, so the
		// restart is seen with the failure that caused it.
		if ev.Actor.State == actors.ActorRestarting && !errors.As(ev.Actor.LastFailure, &pe) {
			t.Fatalf("restart reported with failure %v, want the injected panic", ev.Actor.LastFailure)
		}
		if ev.Actor.Restarts == 1 && ev.Actor.State == actors.ActorRunning {
			break
		}
	}
	if len(states) < 2 || states[len(states)-2] != actors.ActorRestarting {
		t.Fatalf("states %v, want restarting then running", states)
	}
	list = rt.Actors()
	if len(list) != 2 || list[1].Restarts != 1 || list[1].LastFailure == nil || list[0].Restarts != 0 {
		t.Fatalf("after the restart: %+v", list)
	}

	if err := rt.InjectPanic("polyweave/nobody", "x"); !errors.Is(err, actors.ErrNoActor) {
		t.Fatalf("InjectPanic of an unknown id: %v, want ErrNoActor", err)
	}

	if err := conn.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if list := rt.Actors(); len(list) != 0 {
		t.Fatalf("after Close: %+v, want none", list)
	}
	gone := map[string]bool{}
	for len(gone) < 2 {
		ev := <-events
		if ev.Actor.State == actors.ActorStopped {
			gone[ev.Actor.ID] = true
		}
	}
}
