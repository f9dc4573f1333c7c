package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestObserve_RestartAfterQueuedEscalationResumeAnnounced: under
// all-for-one, p escalates a's failure (with a stop written into a after
// the call that failed it), and its own supervisor resumes p, which
// resumes a (see escalatedChild.resume). A restart p then decides about
// its child b's failure reaches a behind that Resume: a runs again
// before it takes the restart, and so is restarted (its stop waits
// behind the restart): the restart is announced for a too.
func TestObserve_RestartAfterQueuedEscalationResumeAnnounced(t *testing.T) {
	boomA, boomB := errors.New("boom a"), errors.New("boom b")
	var ids lateIDs
	dp, da := &heldDispatcher{}, &heldDispatcher{} // see shell_stop_failed_test.go
	acts, told := &eventLog[ActorEvent]{}, &eventLog[supervisor.Event]{}
	rt := startRuntimeWith(t, &RuntimeOptions{OnSupervision: told.add,
		Supervision: supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive {
			// p's failure: p takes the Resume, and a its own, only when
			// the test lets them.
			dp.hold()
			da.hold()
			return supervisor.Resume
		}})})
	t.Cleanup(rt.WatchActors(acts.add))
	ctx := testContext(t)
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomA) {
			return supervisor.Escalate
		}
		return supervisor.Restart
	}
	a := failsWith("a", nil, boomA)
	a.Dispatcher = da
	p := siblings(a, failsWith("b", nil, boomB), decide, func(c Context, a, _ Ref) { failInTurn(c, []Ref{a}, a) })
	p.Dispatcher = dp
	ref := spawnSiblings(t, rt, p, &ids)
	rt.Send(ref, messages.Text("go", "go"))
	waitFor(t, ctx, told.when(func(ev supervisor.Event) bool {
		return ev.Child == ids.p && ev.Directive == supervisor.Resume
	}), "the Resume of p")
	_, pmb := lookup(t, rt, ids.p)
	waitQueued(pmb, 0, 1)
	// b fails while p's Resume waits: the decision about b comes after
	// it.
	bpid, _ := lookup(t, rt, ids.b)
	rt.system.Root.Send(bpid, messages.Text("f", "fail"))
	waitQueued(pmb, 0, 2)
	_, amb := lookup(t, rt, ids.a)
	awaitIdle(amb) // the Resume p sends a waits for da
	dp.release()
	waitFor(t, ctx, told.when(toldAbout(boomB)), "the decision about b")
	waitQueued(amb, 0, 2) // the Resume, and the restart sent after it is told
	da.release()
	waitFor(t, ctx, acts.when(isStopped(&ids.a)), "a's stop")

	if !slices.ContainsFunc(of(acts, ids.a), func(ev ActorEvent) bool { return ev.Actor.State == ActorRestarting }) {
		t.Fatalf("a was not restarted: its events are %+v", of(acts, ids.a))
	}
	if got := affecting(told.all(), ids.a); !slices.ContainsFunc(got, func(ev supervisor.Event) bool {
		return ev.Directive == supervisor.Restart && errors.Is(ev.Reason, boomB)
	}) {
		t.Errorf("the decisions announced for a are %+v, want b's restart among them: a was restarted", got)
	}
}
