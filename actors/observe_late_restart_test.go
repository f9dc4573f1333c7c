package actors

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here announce a restart decided about a duplex only if it
// restarts the duplex: not once the duplex has stopped (with its parent's
// subtree, or after a restart for its sibling's failure), is stopping, or
// has a stop waiting that wins over the restart; and so a restart that
// reaches the duplex's next incarnation, which did not fail, is announced.

// TestObserve_RestartedThenStoppedReportsFailure: a duplex b restarted
// for its sibling's failure before its supervisor decided about its own,
// and then stopped, is reported stopped with that failure as its last
// failure, reported once; the decision, taken after, announces no restart
// of b.
func TestObserve_RestartedThenStoppedReportsFailure(t *testing.T) {
	boomA, boomB := errors.New("boom a"), errors.New("boom b")
	var ids lateIDs
	ctx, rt, acts, told := watchedRuntime(t)
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomB) {
			// The decision about b waits until b, restarted for a's
			// failure, has stopped (a system stop, as a stopping
			// parent sends).
			pid, _ := restartedB(ctx, t, rt, acts, &ids)
			rt.system.Root.Stop(pid)
			await(ctx, acts.when(isStopped(&ids.b)))
		}
		return supervisor.Restart
	}
	failSiblings(t, rt, &ids, failsWith("a", nil, boomA), failsWith("b", nil, boomB), decide)
	waitFor(t, ctx, told.when(toldAbout(boomB)), "the decision about b")

	evs := of(acts, ids.b)
	last := evs[len(evs)-1].Actor
	if last.State != ActorStopped || !errors.Is(last.LastFailure, boomB) {
		t.Errorf("b was reported %s with last failure %v, want stopped with %v: its failure was lost", last.State, last.LastFailure, boomB)
	}
	if got := failureChanges(evs); len(got) != 1 || !errors.Is(got[0], boomB) {
		t.Errorf("b's events reported the failures %v, want %v once", got, boomB)
	}
	if got := affecting(told.all(), ids.b); len(got) != 1 || !errors.Is(got[0].Reason, boomA) {
		t.Errorf("the restarts announced for b are %+v, want a's alone: b had stopped before the decision about its failure", got)
	}
}

// TestObserve_SubtreeStopBeforeDecisionReportsFailure: a duplex c that
// failed as its parent stopped (the stop of the parent's subtree reached
// c before the parent decided about c's failure) is reported stopped with
// its failure as its last failure, once, and the decision, which the
// stopping parent takes after, announces no restart.
func TestObserve_SubtreeStopBeforeDecisionReportsFailure(t *testing.T) {
	boom := errors.New("boom")
	ctx, rt, acts, told := watchedRuntime(t)
	// c fails once the stop of its parent's subtree is posted to it.
	failing := make(chan struct{})
	child := Spec{Name: "c", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_TEXT {
				close(failing)
				for mb := c.(*shell).mb; !mb.stopPosted.Load(); {
					runtime.Gosched()
				}
				c.Fail(boom)
			}
		})
	}}
	decided := make(chan supervisor.Directive, 1)
	parent := parentOf(child, make(chan string, 16), func(c Context, child Ref, _ *messages.Frame) {
		c.Send(child, messages.Text("f", "fail"))
	})
	parent.Supervision = supervisor.MustNew(&supervisor.Options{Decider: func(err error) supervisor.Directive {
		d := supervisor.DefaultDecider(err)
		decided <- d
		return d
	}})
	ref, err := rt.Spawn(parent)
	if err != nil {
		t.Fatal(err)
	}
	id := ref.pid.Id + "/c"
	rt.Send(ref, messages.Text("s", "go"))
	waitFor(t, ctx, failing, "the child's call")
	// The parent's end comes after its decision about c's failure, which
	// c sent it before its own end.
	if err := rt.system.Root.StopFuture(ref.pid).Wait(); err != nil {
		t.Fatalf("stop the parent: %v", err)
	}
	if d := receive(t, ctx, decided, "the decision about the child"); d != supervisor.Restart {
		t.Fatalf("the parent decided %s about its child, want %s", d, supervisor.Restart)
	}

	evs := of(acts, id)
	last := evs[len(evs)-1].Actor
	if last.State != ActorStopped || !errors.Is(last.LastFailure, boom) {
		t.Errorf("the child was reported %s with last failure %v, want stopped with %v", last.State, last.LastFailure, boom)
	}
	if got := failureChanges(evs); len(got) != 1 {
		t.Errorf("the child's events reported the failures %v, want %v once", got, boom)
	}
	if evs := told.all(); len(evs) != 0 {
		t.Errorf("the supervision watchers were told %+v, want nothing: the child had stopped before the decision to restart it", evs)
	}
}

// TestObserve_NoRestartAnnouncedAfterStopWon: under all-for-one, a duplex
// b that failed with a stop written into it after the call that failed it
// ends at that stop when its supervisor's restart comes (see
// mailbox.stops). A decision about its sibling's failure, taken after
// that and before b has taken its stop, announces no restart of b: b
// will not restart.
func TestObserve_NoRestartAnnouncedAfterStopWon(t *testing.T) {
	boomA, boomB := errors.New("boom a"), errors.New("boom b")
	var ids lateIDs
	ctx, rt, acts, told := watchedRuntime(t)
	// b's incarnation ends (its stop won) and waits, before it takes
	// its stop, until the decision about a is told.
	ending := make(chan struct{})
	var once sync.Once
	onEnd := func() {
		once.Do(func() {
			close(ending)
			await(ctx, told.when(toldAbout(boomA)))
		})
	}
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomA) {
			await(ctx, ending)
		}
		return supervisor.Restart
	}
	spec := siblings(failsWith("a", nil, boomA), failsWith("b", onEnd, boomB), decide, func(c Context, a, b Ref) {
		failInTurn(c, []Ref{b}, b, a)
	})
	ref := spawnSiblings(t, rt, spec, &ids)
	rt.Send(ref, messages.Text("go", "go"))
	waitFor(t, ctx, acts.when(isStopped(&ids.b)), "b's stop")
	waitFor(t, ctx, acts.when(isState(&ids.a, ActorRunning, 2)), "a's second restart")

	if got := affecting(told.all(), ids.b); len(got) != 0 {
		t.Errorf("the restarts announced for b are %+v, want none: its stop won over them", got)
	}
	for _, ev := range of(acts, ids.b) {
		if ev.Actor.State == ActorRestarting {
			t.Errorf("b was reported restarting (%+v), want stopped", ev.Actor)
		}
	}
}

// TestObserve_StoppingChildNoRestartAnnounced: a duplex c that failed and
// then took a stop, before its supervisor decided about the failure, is
// still stopping when the decision comes (its own child g has not
// stopped yet): the restart decided is dropped, not announced.
func TestObserve_StoppingChildNoRestartAnnounced(t *testing.T) {
	boom := errors.New("boom")
	ctx, rt, acts, told := watchedRuntime(t)
	// g, c's child, ends once its grandparent has taken the decision.
	decided := make(chan struct{})
	g := Spec{Name: "g", New: func() Logic { return &lateLogic{onEnd: func() { await(ctx, decided) }} }}
	c := Spec{Name: "c", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				mustSpawn(c, g)
			case *messages.Frame:
				if m.GetType() == messages.FrameType_TEXT {
					c.Fail(boom)
				}
			}
		})
	}}
	var cID string
	parent := parentOf(c, make(chan string, 16), func(p Context, child Ref, f *messages.Frame) {
		if f.GetStreamId() == "probe" {
			close(decided) // the decision came before this frame
			return
		}
		// The failure of c is queued here, and c stops (a system stop,
		// as a stopping parent sends) before this turn ends and the
		// decision is taken.
		p.Send(child, messages.Text("f", "fail"))
		waitQueued(p.(*shell).mb, 0, 1)
		rt.system.Root.Stop(child.pid)
		await(ctx, acts.when(isStopped(&cID)))
	})
	ref, err := rt.Spawn(parent)
	if err != nil {
		t.Fatal(err)
	}
	cID = ref.pid.Id + "/c"
	rt.Send(ref, messages.Text("s", "go"))
	rt.Send(ref, messages.Text("probe", "probe"))
	waitFor(t, ctx, decided, "the decision about c")
	if err := rt.system.Root.StopFuture(ref.pid).Wait(); err != nil {
		t.Fatalf("stop the parent: %v", err)
	}
	if evs := told.all(); len(evs) != 0 {
		t.Errorf("the supervision watchers were told %+v, want nothing: c had stopped before the decision to restart it", evs)
	}
	evs := of(acts, cID)
	if last := evs[len(evs)-1].Actor; last.State != ActorStopped || !errors.Is(last.LastFailure, boom) {
		t.Errorf("c was reported %s with last failure %v, want stopped with %v", last.State, last.LastFailure, boom)
	}
}

// holdLogic fails with err on a TEXT "fail", and holds its turn on a
// TEXT "hold" until release is closed (or ctx ends), closing held first.
type holdLogic struct {
	ctx           context.Context
	err           error
	held, release chan struct{}
}

func (l *holdLogic) Receive(c Context, msg any) {
	f, ok := msg.(*messages.Frame)
	if !ok || f.GetType() != messages.FrameType_TEXT {
		return
	}
	switch f.GetText() {
	case "fail":
		c.Fail(l.err)
	case "hold":
		close(l.held)
		await(l.ctx, l.release)
	}
}

// TestObserve_LateRestartOfNextIncarnationAnnounced: the restart decided
// about b's failure after b was restarted for its sibling's, reaching b's
// next incarnation, which did not fail, busy, with a stop written into
// it, restarts it (the stop waits behind the restart: see mailbox.stops)
// and is announced as a restart of b.
func TestObserve_LateRestartOfNextIncarnationAnnounced(t *testing.T) {
	boomA, boomB := errors.New("boom a"), errors.New("boom b")
	var ids lateIDs
	ctx, rt, acts, told := watchedRuntime(t)
	held, release := make(chan struct{}), make(chan struct{})
	b := Spec{Name: "b", New: func() Logic { return &holdLogic{ctx: ctx, err: boomB, held: held, release: release} }}
	var once sync.Once
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomB) {
			// The decision about b waits until b, restarted for a's
			// failure, holds a turn, with a stop written into it after.
			await(ctx, acts.when(isState(&ids.b, ActorRunning, 1)))
			once.Do(func() {
				pid, _ := lookup(t, rt, ids.b)
				rt.system.Root.Send(pid, messages.Text("h", "hold"))
				rt.system.Root.Poison(pid)
			})
			await(ctx, held)
		}
		return supervisor.Restart
	}
	failSiblings(t, rt, &ids, failsWith("a", nil, boomA), b, decide)
	waitFor(t, ctx, told.when(toldAbout(boomB)), "the decision about b")
	close(release)
	waitFor(t, ctx, acts.when(isStopped(&ids.b)), "b's stop")

	if got := affecting(told.all(), ids.b); len(got) != 2 {
		t.Errorf("the restarts announced for b are %+v, want a's and then its own", got)
	}
	restarts := 0
	for _, ev := range of(acts, ids.b) {
		if ev.Actor.State == ActorRestarting {
			restarts++
		}
	}
	if restarts != 2 {
		t.Errorf("b was restarted %d times, want 2", restarts)
	}
}
