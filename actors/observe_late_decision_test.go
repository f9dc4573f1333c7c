package actors

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here take a supervisor's decision about a failure late: after
// the incarnation that failed has ended (restarted all-for-one for a
// sibling's failure). The failure is reported once, on the incarnation
// that failed, and the decision is credited to no incarnation that
// replaced it.

// eventLog records the events a runtime's watcher is told, in the order
// they come, and tells a test when one it waits for has come.
type eventLog[E any] struct {
	mu    sync.Mutex
	evs   []E
	waits []eventWait[E]
}

type eventWait[E any] struct {
	match func(E) bool
	done  chan struct{}
}

// add records ev: a watcher's callback.
func (l *eventLog[E]) add(ev E) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
	l.waits = slices.DeleteFunc(l.waits, func(w eventWait[E]) bool {
		if w.match(ev) {
			close(w.done)
			return true
		}
		return false
	})
}

// when returns a channel closed once an event that match accepts has
// been recorded (already, or from now on).
func (l *eventLog[E]) when(match func(E) bool) <-chan struct{} {
	done := make(chan struct{})
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.ContainsFunc(l.evs, match) {
		close(done)
		return done
	}
	l.waits = append(l.waits, eventWait[E]{match: match, done: done})
	return done
}

// all returns the events recorded so far.
func (l *eventLog[E]) all() []E {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// of returns the events recorded so far about the duplex id.
func of(l *eventLog[ActorEvent], id string) []ActorEvent {
	return slices.DeleteFunc(l.all(), func(ev ActorEvent) bool { return ev.Actor.ID != id })
}

// failureChanges returns the failures that evs, one duplex's events,
// report as new: each LastFailure that differs from the one before it
// (by its time).
func failureChanges(evs []ActorEvent) []error {
	var out []error
	var at ActorEvent
	for _, ev := range evs {
		if ev.Actor.LastFailure != nil && !ev.Actor.LastFailureAt.Equal(at.Actor.LastFailureAt) {
			out = append(out, ev.Actor.LastFailure)
		}
		at = ev
	}
	return out
}

// lateLogic fails with err on a TEXT "fail"; ending calls onEnd (unless
// nil) as its incarnation ends (see FailureHandler).
type lateLogic struct {
	err   error
	onEnd func()
}

func (l *lateLogic) Receive(c Context, msg any) {
	if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_TEXT && f.GetText() == "fail" {
		c.Fail(l.err)
	}
}

func (l *lateLogic) OnFailure(Context, error) {
	if l.onEnd != nil {
		l.onEnd()
	}
}

// failsWith is the spec of a duplex named name whose n-th incarnation
// (from 1) fails with errs[n-1] on a TEXT "fail" (with the last of errs
// past them), calling onEnd (unless nil) as an incarnation ends.
func failsWith(name string, onEnd func(), errs ...error) Spec {
	var n atomic.Int32
	return Spec{Name: name, New: func() Logic {
		i := min(int(n.Add(1)), len(errs))
		return &lateLogic{err: errs[i-1], onEnd: onEnd}
	}}
}

// siblings is the spec of a duplex "p" that supervises its children a
// and b all-for-one, deciding with decide, and spawns them as it starts.
// A frame written into it runs turn with its children, in its turn: the
// decisions about the failures turn causes wait for its end.
func siblings(a, b Spec, decide supervisor.Decider, turn func(c Context, a, b Ref)) Spec {
	strategy := supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne, Decider: decide})
	return Spec{Name: "p", Supervision: strategy, New: func() Logic {
		var ra, rb Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				ra, rb = mustSpawn(c, a), mustSpawn(c, b)
			case *messages.Frame:
				if m.GetStreamId() == "go" {
					turn(c, ra, rb)
				}
			}
		})
	}}
}

// failInTurn fails each of children in order, in c's turn: it writes the
// child a TEXT "fail" and waits until the child's failure is queued to
// c, so that c's supervisor decides about them in that order once the
// turn ends. A stop (Context.Stop) follows the frame of each child in
// stopped.
func failInTurn(c Context, stopped []Ref, children ...Ref) {
	mb := c.(*shell).mb
	for i, child := range children {
		c.Send(child, messages.Text("f", "fail"))
		if slices.ContainsFunc(stopped, child.Equal) {
			c.Stop(child)
		}
		waitQueued(mb, 0, int32(i+1))
	}
}

// lateIDs are the ids of the duplexes of a siblings test, set before the
// frame that fails them is written.
type lateIDs struct{ p, a, b string }

// spawnSiblings spawns spec (a siblings duplex) under rt and returns its
// ids and its children's.
func spawnSiblings(t *testing.T, rt *Runtime, spec Spec, ids *lateIDs) Ref {
	t.Helper()
	ref, err := rt.Spawn(spec)
	if err != nil {
		t.Fatal(err)
	}
	*ids = lateIDs{p: ref.pid.Id, a: ref.pid.Id + "/a", b: ref.pid.Id + "/b"}
	return ref
}

// failSiblings spawns a siblings duplex with children a and b under rt,
// noting its ids in ids, and has it fail a and then b.
func failSiblings(t *testing.T, rt *Runtime, ids *lateIDs, a, b Spec, decide supervisor.Decider) {
	t.Helper()
	ref := spawnSiblings(t, rt, siblings(a, b, decide, func(c Context, a, b Ref) { failInTurn(c, nil, a, b) }), ids)
	rt.Send(ref, messages.Text("go", "go"))
}

// isState matches the event that reports id in state after restarts
// restarts.
func isState(id *string, state ActorState, restarts int) func(ActorEvent) bool {
	return func(ev ActorEvent) bool {
		return ev.Actor.ID == *id && ev.Actor.State == state && ev.Actor.Restarts == restarts
	}
}

// isStopped matches the event that reports id stopped.
func isStopped(id *string) func(ActorEvent) bool {
	return func(ev ActorEvent) bool { return ev.Actor.ID == *id && ev.Actor.State == ActorStopped }
}

// watchedRuntime starts a runtime that t's cleanup closes, with the
// events its watchers are told recorded, and returns it with a context
// that bounds the test's waits.
func watchedRuntime(t *testing.T) (context.Context, *Runtime, *eventLog[ActorEvent], *eventLog[supervisor.Event]) {
	t.Helper()
	acts, told := &eventLog[ActorEvent]{}, &eventLog[supervisor.Event]{}
	rt := startRuntimeWith(t, &RuntimeOptions{OnSupervision: told.add})
	t.Cleanup(rt.WatchActors(acts.add))
	return testContext(t), rt, acts, told
}

// toldAbout matches the supervision event about reason.
func toldAbout(reason error) func(supervisor.Event) bool {
	return func(ev supervisor.Event) bool { return errors.Is(ev.Reason, reason) }
}

// affecting returns the supervision events of evs whose Affected lists id.
func affecting(evs []supervisor.Event, id string) []supervisor.Event {
	return slices.DeleteFunc(evs, func(ev supervisor.Event) bool { return !slices.Contains(ev.Affected, id) })
}

// TestObserve_SiblingRestartReportsUndecidedFailure: under all-for-one, a
// duplex b that failed and was restarted for its sibling's failure before
// its supervisor decided about its own is reported restarting with its
// failure as LastFailure. The decision about it, taken after, is about an
// incarnation that has ended: it is credited to no other (no ActorEvent
// reports the failure again), it is told to the supervision watchers
// once, as the restart it carries out, and every restart is counted once.
func TestObserve_SiblingRestartReportsUndecidedFailure(t *testing.T) {
	boomA, boomB := errors.New("boom a"), errors.New("boom b")
	var ids lateIDs
	ctx, rt, acts, told := watchedRuntime(t)
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomB) {
			// The decision about b waits until a's restarted b.
			await(ctx, acts.when(isState(&ids.b, ActorRunning, 1)))
		}
		return supervisor.Restart
	}
	failSiblings(t, rt, &ids, failsWith("a", nil, boomA), failsWith("b", nil, boomB), decide)
	waitFor(t, ctx, told.when(toldAbout(boomB)), "the decision about b")
	// That decision restarts b's second incarnation too (all-for-one).
	waitFor(t, ctx, acts.when(isState(&ids.b, ActorRunning, 2)), "b's second restart")

	evs := of(acts, ids.b)
	i := slices.IndexFunc(evs, func(ev ActorEvent) bool { return ev.Actor.State == ActorRestarting })
	if i < 0 || !errors.Is(evs[i].Actor.LastFailure, boomB) || evs[i].Actor.Restarts != 1 {
		t.Errorf("b's first restart was reported as %+v, want restart 1 with last failure %v: its failure, undecided, was dropped", evs[i].Actor, boomB)
	}
	if got := failureChanges(evs); len(got) != 1 || !errors.Is(got[0], boomB) {
		t.Errorf("b's events reported the failures %v, want %v once", got, boomB)
	}
	restarts := 0
	for _, ev := range evs {
		if ev.Actor.State == ActorFailed {
			t.Errorf("b was reported failed (%+v): the late decision was credited to the incarnation that replaced the one that failed", ev.Actor)
		}
		if ev.Actor.State == ActorRestarting {
			restarts++
			if ev.Actor.Restarts != restarts {
				t.Errorf("b's restart %d was counted as %d", restarts, ev.Actor.Restarts)
			}
		}
	}
	var about []supervisor.Event
	for _, ev := range told.all() {
		if ev.Child == ids.b {
			about = append(about, ev)
		}
	}
	if len(about) != 1 || about[0].Directive != supervisor.Restart {
		t.Errorf("the supervision watchers were told %+v about b, want its restart once", about)
	}
}

// TestObserve_LateDecisionNotCreditedToNextIncarnation: the decision about
// b's failure, taken after b was restarted for its sibling's failure and
// its next incarnation failed too, is not that incarnation's: a stop that
// then wins over the restart reports b stopped with the next
// incarnation's failure, whose own decision comes after the stop, and
// announces no restart of b.
func TestObserve_LateDecisionNotCreditedToNextIncarnation(t *testing.T) {
	boomA, boomB, boomB2 := errors.New("boom a"), errors.New("boom b"), errors.New("boom b again")
	var ids lateIDs
	ctx, rt, acts, told := watchedRuntime(t)
	decide := func(err error) supervisor.Directive {
		if errors.Is(err, boomB) {
			// The decision about b's first failure waits until b,
			// restarted for a's, has failed again, with a stop written
			// into it after the call that failed it.
			pid, mb := restartedB(ctx, t, rt, acts, &ids)
			rt.system.Root.Send(pid, messages.Text("f", "fail"))
			rt.system.Root.Poison(pid)
			for mb.failures.Load() < 2 && ctx.Err() == nil {
				runtime.Gosched()
			}
		}
		if errors.Is(err, boomB2) {
			// The decision about b's second failure waits until b
			// has stopped.
			await(ctx, acts.when(isStopped(&ids.b)))
		}
		return supervisor.Restart
	}
	failSiblings(t, rt, &ids, failsWith("a", nil, boomA), failsWith("b", nil, boomB, boomB2), decide)
	stopped := acts.when(isStopped(&ids.b))
	waitFor(t, ctx, stopped, "b's stop")
	waitFor(t, ctx, told.when(toldAbout(boomB2)), "the decision about b's second failure")

	evs := of(acts, ids.b)
	last := evs[len(evs)-1].Actor
	if last.State != ActorStopped || !errors.Is(last.LastFailure, boomB2) {
		t.Errorf("b was reported %s with last failure %v, want stopped with %v: the decision about its first failure was credited to the incarnation that replaced it",
			last.State, last.LastFailure, boomB2)
	}
	if got := failureChanges(evs); len(got) != 2 || !errors.Is(got[0], boomB) || !errors.Is(got[1], boomB2) {
		t.Errorf("b's events reported the failures %v, want %v and then %v, once each", got, boomB, boomB2)
	}
	for _, ev := range evs {
		if ev.Actor.State == ActorFailed {
			t.Errorf("b was reported failed (%+v): no decision was carried out on it", ev.Actor)
		}
	}
	// b is restarted once, for a's failure; the restart of each decision
	// about its own failures finds it stopping.
	if got := affecting(told.all(), ids.b); len(got) != 1 || !errors.Is(got[0].Reason, boomA) {
		t.Errorf("the restarts announced for b are %+v, want a's alone", got)
	}
}

// await waits until ch is closed, or ctx ends: a wait on an actor's
// goroutine, which the test's own wait for what follows bounds.
func await(ctx context.Context, ch <-chan struct{}) {
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// restartedB waits until the b of a siblings duplex has been restarted
// once (or ctx ends), and returns its pid and mailbox.
func restartedB(ctx context.Context, t *testing.T, rt *Runtime, acts *eventLog[ActorEvent], ids *lateIDs) (*actor.PID, *mailbox) {
	await(ctx, acts.when(isState(&ids.b, ActorRunning, 1)))
	return lookup(t, rt, ids.b)
}

// lookup returns the pid and the mailbox of the duplex id, failing t when
// it is not one of rt's.
func lookup(t *testing.T, rt *Runtime, id string) (*actor.PID, *mailbox) {
	rt.watch.mu.Lock()
	defer rt.watch.mu.Unlock()
	e, ok := rt.watch.table[id]
	if !ok {
		t.Errorf("no duplex %s", id)
		return nil, nil
	}
	return e.pid, e.owner.cell.mb
}
