package actors

import (
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestObserve_StoppingSiblingNoRestartAnnounced: under all-for-one, a
// sibling b that has taken a stop, and still waits for its own child g
// to stop, when a's failure is decided, is not restarted by the restart
// decided (its mailbox drops a restart after the stop): the restart is
// announced for a alone.
func TestObserve_StoppingSiblingNoRestartAnnounced(t *testing.T) {
	boomA := errors.New("boom a")
	var ids lateIDs
	ctx, rt, acts, told := watchedRuntime(t)
	// g, b's child, ends once the decision about a is told.
	decided := make(chan struct{})
	g := Spec{Name: "g", New: func() Logic { return &lateLogic{onEnd: func() { await(ctx, decided) }} }}
	b := Spec{Name: "b", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if _, ok := msg.(Started); ok {
				mustSpawn(c, g)
			}
		})
	}}
	decide := func(error) supervisor.Directive { return supervisor.Restart }
	ref := spawnSiblings(t, rt, siblings(failsWith("a", nil, boomA), b, decide, func(c Context, a, b Ref) {
		// b takes a stop (a system stop, as a stopping parent sends)
		// before a fails, in this turn: the decision comes after it.
		rt.system.Root.Stop(b.pid)
		await(ctx, acts.when(isStopped(&ids.b)))
		failInTurn(c, nil, a)
	}), &ids)
	rt.Send(ref, messages.Text("go", "go"))
	waitFor(t, ctx, told.when(toldAbout(boomA)), "the decision about a")
	close(decided)

	if got := affecting(told.all(), ids.b); len(got) != 0 {
		t.Errorf("the restarts announced for b are %+v, want none: b was stopping when the restart was decided", got)
	}
	if got := affecting(told.all(), ids.a); len(got) != 1 {
		t.Errorf("the restarts announced for a are %+v, want one", got)
	}
}

// TestObserve_StoppingListDropsGone: the list of stopping duplexes (see
// watch.stopping) keeps no duplex long after its process is gone: one
// after another stopped, a few hundred leave fewer than the list's
// first mark behind them.
func TestObserve_StoppingListDropsGone(t *testing.T) {
	rt := startRuntimeWith(t, nil)
	const n = 300
	for range n {
		ref, err := rt.Spawn(Spec{New: func() Logic { return LogicFunc(func(Context, any) {}) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.system.Root.StopFuture(ref.pid).Wait(); err != nil {
			t.Fatalf("stop %s: %v", ref.pid.Id, err)
		}
	}
	rt.watch.mu.Lock()
	left := len(rt.watch.stopping)
	rt.watch.mu.Unlock()
	// Each is gone before the next stops: the list is pruned down to
	// none at each mark, and the mark stays at 64.
	if left > 64 {
		t.Errorf("%d of %d stopped duplexes are still listed as stopping, want at most 64", left, n)
	}
}
