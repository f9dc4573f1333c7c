package actors

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestObserve_RestartAfterQueuedResumeAnnounced: under all-for-one, b
// fails with a stop written into it after the call that failed it, and
// then a fails. The decision about b resumes both; the one about a,
// taken before b has taken that Resume, restarts both. b takes the
// Resume first, runs again, and so is restarted (its stop waits behind
// the restart, as for any duplex that runs: see mailbox.stops): the
// restart is announced for b too.
func TestObserve_RestartAfterQueuedResumeAnnounced(t *testing.T) {
	boomA, boomB := errors.New("boom a"), errors.New("boom b")
	var ids lateIDs
	disp := &heldDispatcher{} // see shell_stop_failed_test.go
	acts, told := &eventLog[ActorEvent]{}, &eventLog[supervisor.Event]{}
	rt := startRuntimeWith(t, &RuntimeOptions{OnSupervision: told.add, Dispatcher: disp})
	t.Cleanup(rt.WatchActors(acts.add))
	ctx := testContext(t)
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomB) {
			// The Resume sent now reaches no mailbox until the decision
			// about a is told: b's, suspended, is idle, and its run
			// waits for the dispatcher.
			_, mb := lookup(t, rt, ids.b)
			awaitIdle(mb)
			disp.hold()
			return supervisor.Resume
		}
		return supervisor.Restart
	}
	a, b := failsWith("a", nil, boomA), failsWith("b", nil, boomB)
	ref := spawnSiblings(t, rt, siblings(a, b, decide, func(c Context, a, b Ref) {
		failInTurn(c, []Ref{b}, b, a)
	}), &ids)
	rt.Send(ref, messages.Text("go", "go"))
	waitFor(t, ctx, told.when(toldAbout(boomA)), "the decision about a")
	_, bmb := lookup(t, rt, ids.b)
	waitQueued(bmb, 0, 2) // the Resume, and the restart sent after it is told
	disp.release()
	waitFor(t, ctx, acts.when(isStopped(&ids.b)), "b's stop")

	restarted := slices.ContainsFunc(of(acts, ids.b), func(ev ActorEvent) bool { return ev.Actor.State == ActorRestarting })
	if !restarted {
		t.Fatalf("b was not restarted: its events are %+v", of(acts, ids.b))
	}
	if got := affecting(told.all(), ids.b); !slices.ContainsFunc(got, func(ev supervisor.Event) bool {
		return ev.Directive == supervisor.Restart && errors.Is(ev.Reason, boomA)
	}) {
		t.Errorf("the decisions announced for b are %+v, want a's restart among them: b was restarted", got)
	}
}

// awaitIdle waits until mb, a failed duplex's, is suspended and no run of
// it is under way: a message posted to it then schedules a run.
func awaitIdle(mb *mailbox) {
	for !mb.suspended.Load() || mb.status.Load() != mailboxIdle {
		runtime.Gosched()
	}
}
