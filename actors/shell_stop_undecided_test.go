package actors

import (
	"context"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// failsOnCall is the spec of a duplex that fails with boom on any TEXT,
// closing failing (once) just before.
func failsOnCall(boom error, failing chan<- struct{}) Spec {
	return Spec{Name: "c", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_TEXT {
				close(failing)
				c.Fail(boom)
			}
		})
	}}
}

// stoppedEvents returns a channel that gets the events reporting id
// stopped, watched on rt until the test ends.
func stoppedEvents(t *testing.T, rt *Runtime, id func() string) <-chan ActorEvent {
	stopped := make(chan ActorEvent, 4)
	t.Cleanup(rt.WatchActors(func(ev ActorEvent) {
		if ev.Actor.State == ActorStopped && ev.Actor.ID == id() {
			stopped <- ev
		}
	}))
	return stopped
}

// receive returns what ch brings first, failing t with what when ctx
// ends before.
func receive[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
		panic("unreachable")
	}
}

// TestShell_StopBeforeDecisionReportsFailure: a duplex that failed and
// stopped before its supervisor decided about the failure (its parent
// busy, the stop a system one, as a stopping parent sends its children)
// is reported stopped with that failure as its last failure: the
// runtime's observers learn of the failure, whose decision then finds
// nothing to restart and is told to no one.
func TestShell_StopBeforeDecisionReportsFailure(t *testing.T) {
	told := make(chan supervisor.Event, 4)
	rt := startRuntimeWith(t, &RuntimeOptions{OnSupervision: func(ev supervisor.Event) { told <- ev }})
	boom := errors.New("boom")
	failing, release := make(chan struct{}), make(chan struct{})
	children := make(chan Ref, 1)
	got := make(chan string, 16)
	parent := parentOf(failsOnCall(boom, failing), got, func(c Context, child Ref, _ *messages.Frame) {
		children <- child
		c.Send(child, messages.Text("f", "fail"))
		<-release // the child's failure waits for this turn's end to be decided
	})
	childID := make(chan string, 1)
	var id string
	stopped := stoppedEvents(t, rt, func() string {
		select {
		case id = <-childID:
		default:
		}
		return id
	})
	ref, err := rt.Spawn(parent)
	if err != nil {
		t.Fatal(err)
	}
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	child := receive(t, ctx, children, "the parent's frame")
	childID <- child.pid.Id
	waitFor(t, ctx, failing, "the child's failure")
	// A system stop, as the parent's own stop sends: taken while the
	// child is suspended for its failure, after the failure.
	rt.system.Root.Stop(child.pid)
	ev := receive(t, ctx, stopped, "the child's stop")
	close(release)
	if !errors.Is(ev.Actor.LastFailure, boom) || ev.Actor.LastFailureAt.IsZero() {
		t.Errorf("the child's stop was reported with last failure %v at %v, want %v: its failure was lost",
			ev.Actor.LastFailure, ev.Actor.LastFailureAt, boom)
	}
	// The parent gets the child's stop after the decision, which its
	// failure, come first, is taken at the end of the parent's turn.
	untilStopped(t, ctx, got, nil)
	select {
	case ev := <-told:
		t.Errorf("OnSupervision was told %s for %s, want nothing: the child stopped before the decision", ev.Directive, ev.Child)
	default:
	}
}

// TestShell_StopAfterDecisionReportsFailureOnce: a duplex stopped by its
// supervisor's decision about its failure is reported stopped with the
// failure the decision recorded, not recorded again.
func TestShell_StopAfterDecisionReportsFailureOnce(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts})})
	boom := errors.New("boom")
	failing := make(chan struct{})
	decided := make(chan ActorEvent, 4)
	t.Cleanup(rt.WatchActors(func(ev ActorEvent) {
		if ev.Actor.LastFailure != nil && ev.Actor.State != ActorStopped {
			decided <- ev
		}
	}))
	var id string
	ref, err := rt.Spawn(failsOnCall(boom, failing))
	if err != nil {
		t.Fatal(err)
	}
	id = ref.pid.Id
	stopped := stoppedEvents(t, rt, func() string { return id })
	rt.Send(ref, messages.Text("f", "fail"))
	ctx := testContext(t)
	ev := receive(t, ctx, stopped, "the duplex's stop")
	if !errors.Is(ev.Actor.LastFailure, boom) {
		t.Fatalf("the stop was reported with last failure %v, want %v", ev.Actor.LastFailure, boom)
	}
	select {
	case d := <-decided:
		if !d.Actor.LastFailureAt.Equal(ev.Actor.LastFailureAt) {
			t.Errorf("the stop reports the failure at %v, the decision at %v: recorded twice", ev.Actor.LastFailureAt, d.Actor.LastFailureAt)
		}
	default:
		t.Error("the decision to stop the duplex was not reported before its stop")
	}
}
