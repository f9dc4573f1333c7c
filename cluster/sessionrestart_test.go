package cluster_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/cluster"
)

// TestMember_SessionActorRestartCancelsItsRun: a session actor that
// panics (here once, as it handles the claim of its first run, once the
// run is inside its call) is
// restarted by its supervisor, and the new instance knows nothing of the
// run the old one started. The restart cancels that run and answers the
// request it held (moved), so Run asks again and the new instance runs
// the session on a new claim (epoch 2), to one answer; the first run's
// call, waiting, sees its context end and has no side effect (the
// second run answers it as interrupted). The first
// run's end, reaching the new instance, is recognised as the old one's
// and ignored: it neither fails the new instance (no further restart)
// nor replaces its answer, which a later Run gets from it.
func TestMember_SessionActorRestartCancelsItsRun(t *testing.T) {
	leakCheck(t)
	var panicked atomic.Bool
	var starts atomic.Int32
	finishedCh := make(chan struct{}, 16)
	inCall, canceled, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	cluster.SetSessionMessageHook(func(msg string) {
		switch msg {
		case "started":
			starts.Add(1)
		case "claimed":
			if panicked.CompareAndSwap(false, true) {
				<-inCall // the run goes on meanwhile: it needs nothing of the actor
				panic("a bug of the session actor, once")
			}
		case "finished":
			finishedCh <- struct{}{}
		}
	})
	t.Cleanup(func() { cluster.SetSessionMessageHook(nil) }) // after the member's Close (cleanups run last first)

	store := openStore(t, freshSchema())
	side := newSideFile(t)
	var incarnations atomic.Int32
	inner := sessionFunc(t, 1, side, func(string) hooks {
		n := incarnations.Add(1)
		return hooks{before: func(ctx context.Context, call string) {
			if n != 1 {
				return
			}
			close(inCall)
			select {
			case <-ctx.Done():
				close(canceled)
			case <-release:
			}
		}}
	})
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: inner,
		// Longer than the test may take: a request is answered by the
		// session's end or the restart, never by its hold.
		Hold: 5 * time.Minute,
	})
	t.Cleanup(func() { close(release) })                                  // before the member closes, which waits for the call
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang, not on speed
	defer cancel()
	runRestarted(ctx, t, m, &panicked)
	select {
	case <-canceled:
	case <-ctx.Done():
		t.Fatal("the first run's call never saw its context end: the restart did not cancel the run")
	}
	// Both runs' ends have reached the actor (the first's, late, at the
	// new instance).
	for range 2 {
		select {
		case <-finishedCh:
		case <-ctx.Done():
			t.Fatal("the actor was never told of the end of both runs")
		}
	}
	again, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil {
		t.Fatalf("Run again: %v", err)
	}
	if again.Text != "All done." || again.Epoch != 2 || again.Requests != 1 {
		t.Errorf("Run again: %+v, want the answer kept at epoch 2, in one request", again)
	}
	if n := starts.Load(); n != 2 {
		t.Errorf("the session actor started %d times, want 2 (once, and once restarted)", n)
	}
	// The call, cancelled before its append, is answered as interrupted
	// when the second run resumes the session: it never ran.
	if got := side.runs(t); len(got) != 0 {
		t.Errorf("side effects %v, want none (the call cancelled, then answered as interrupted)", got)
	}
}

// TestMember_SessionActorRestartIgnoresTheOldRunsEnd: the end of a run
// started before the session actor restarted (here the actor panics once
// as it handles the run's claim, and the run goes on to its answer)
// reaches the new instance, whether or not that one has started a run of
// its own; it is recognised as the old one's and ignored: the new
// instance neither panics on it (it has nothing of the old run to stop)
// nor takes its answer for its own. Run gets one answer, from the run of
// the restarted actor (epoch 2), which a later Run gets again.
func TestMember_SessionActorRestartIgnoresTheOldRunsEnd(t *testing.T) {
	leakCheck(t)
	var panicked atomic.Bool
	var starts atomic.Int32
	finishedCh := panicAtFirstClaim(t, &panicked, &starts)
	m := startLoneMember(t, &cluster.Options{
		Store:          openStore(t, freshSchema()),
		Session:        sessionFunc(t, 1, newSideFile(t), nil),
		Hold:           50 * time.Millisecond,
		RequestTimeout: time.Second,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang, not on speed
	defer cancel()
	runRestarted(ctx, t, m, &panicked)
	for range 2 {
		select {
		case <-finishedCh:
		case <-ctx.Done():
			t.Fatal("the actor was never told of the end of both runs")
		}
	}
	again, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil {
		t.Fatalf("Run again: %v", err)
	}
	if again.Text != "All done." || again.Epoch != 2 {
		t.Errorf("Run again: %+v, want the answer kept at epoch 2", again)
	}
	if n := starts.Load(); n != 2 {
		t.Errorf("the session actor started %d times, want 2 (once, and once restarted by the test's panic)", n)
	}
}

// panicAtFirstClaim makes the session actor panic once, as it handles
// the first run's claim (panicked says it did), counts the runs started
// in starts (when not nil), and returns a channel that receives once
// for each run that finished. The hook is removed after the member's
// Close (cleanups run last first).
func panicAtFirstClaim(t *testing.T, panicked *atomic.Bool, starts *atomic.Int32) <-chan struct{} {
	finished := make(chan struct{}, 16)
	cluster.SetSessionMessageHook(func(msg string) {
		switch msg {
		case "started":
			if starts != nil {
				starts.Add(1)
			}
		case "claimed":
			if panicked.CompareAndSwap(false, true) {
				panic("a bug of the session actor, once")
			}
		case "finished":
			finished <- struct{}{}
		}
	})
	t.Cleanup(func() { cluster.SetSessionMessageHook(nil) })
	return finished
}

// runRestarted runs session "s" on m, whose session actor panics once
// (panicked says it did), and checks that the answer is the restarted
// actor's run, at epoch 2.
func runRestarted(ctx context.Context, t *testing.T, m *cluster.Member, panicked *atomic.Bool) {
	t.Helper()
	res, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil {
		t.Fatalf("Run of a session whose actor restarted: %v; want its answer", err)
	}
	if !panicked.Load() {
		t.Fatal("the session actor never panicked")
	}
	if res.Text != "All done." || res.Epoch != 2 {
		t.Errorf("result %+v, want \"All done.\" at epoch 2 (the run of the restarted actor)", res)
	}
}

// TestMember_SessionActorTimersEndWithTheirInstance: the timers a
// session actor starts (a held request's hold, an ended session's
// linger) are stopped once what they time is settled, and when their
// instance ends: the hold of a request that the restart of its actor
// answered, and that of a request the session's end answered, are not
// left pending (to fire, later, into the restarted instance, which
// ignores them); nor is the linger of the session once its member has
// closed and its actor stopped. Hold and Linger are longer than the test
// may take, so no timer fires of itself.
func TestMember_SessionActorTimersEndWithTheirInstance(t *testing.T) {
	leakCheck(t)
	pending := cluster.WatchSessionTimers(t)
	var panicked atomic.Bool
	finishedCh := panicAtFirstClaim(t, &panicked, nil)
	m := startLoneMember(t, &cluster.Options{
		Store:   openStore(t, freshSchema()),
		Session: sessionFunc(t, 1, newSideFile(t), nil),
		Hold:    5 * time.Minute,
		Linger:  5 * time.Minute,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang, not on speed
	defer cancel()
	runRestarted(ctx, t, m, &panicked)
	for range 2 {
		select {
		case <-finishedCh:
		case <-ctx.Done():
			t.Fatal("the actor was never told of the end of both runs")
		}
	}
	if n := pending(); n != 1 {
		t.Errorf("%d session timers pending once the session ended, want 1 (its linger): the holds of the requests answered are still pending", n)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := pending(); n != 0 {
		t.Errorf("%d session timers pending once the member closed, want none", n)
	}
}
