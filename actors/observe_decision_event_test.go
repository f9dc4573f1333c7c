package actors

import (
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestObserve_DecisionEventsMarked: the event of a supervisor's decision
// is marked as one (ActorEvent.Decision), and the others are not: a
// watcher that counts the incarnations that run again (running, with
// restarts) counts each restart once, where the decision of an immediate
// restart, reported running with the restarts of the incarnation that
// failed, would count it twice.
func TestObserve_DecisionEventsMarked(t *testing.T) {
	boom := errors.New("boom")
	ctx, rt, acts, _ := watchedRuntime(t)
	ref, err := rt.Spawn(failsWith("d", nil, boom))
	if err != nil {
		t.Fatal(err)
	}
	id := ref.pid.Id
	for i := 1; i <= 3; i++ {
		rt.Send(ref, messages.Text("f", "fail"))
		waitFor(t, ctx, acts.when(isState(&id, ActorRunning, i)), "a restart")
	}
	decisions, reruns := 0, 0
	for _, ev := range of(acts, id) {
		switch {
		case ev.Decision:
			decisions++
			if !errors.Is(ev.Actor.LastFailure, boom) {
				t.Errorf("a decision's event reports the last failure %v, want %v", ev.Actor.LastFailure, boom)
			}
		case ev.Actor.State == ActorRunning && ev.Actor.Restarts > 0:
			reruns++
		}
	}
	if decisions != 3 || reruns != 3 {
		t.Errorf("the events report %d decisions and %d incarnations running again, want 3 and 3", decisions, reruns)
	}
}
