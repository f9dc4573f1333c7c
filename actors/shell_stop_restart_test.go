package actors

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_RestartAfterStopIsDropped: a supervisor's restart that
// reaches a duplex after its stop (its parent stopped it, ending
// normally, while the supervisor still decided about a failure of it:
// the failure is escalated after the failed call was answered) must not
// bring it back. protoactor would carry it out, incarnating a stopped
// actor afresh: a duplex no parent knows, shown running (no restart
// counted) by the runtime's registry after it reported its stop.
func TestShell_RestartAfterStopIsDropped(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	rt := closedRuntime(t, nil)
	var events []ActorEvent
	var evMu sync.Mutex
	defer rt.WatchActors(func(ev ActorEvent) {
		evMu.Lock()
		events = append(events, ev)
		evMu.Unlock()
	})()

	var incarnations atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	spec := Spec{Name: "k", New: func() Logic {
		incarnations.Add(1)
		return LogicFunc(func(_ Context, msg any) {
			if _, ok := msg.(*messages.Frame); ok {
				close(entered)
				<-release
			}
		})
	}}
	conn, err := rt.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("s", "hold")); err != nil {
		t.Fatal(err)
	}
	<-entered
	list := rt.Actors()
	if len(list) != 1 {
		t.Fatalf("Actors() = %+v, want the held duplex", list)
	}
	rt.watch.mu.Lock()
	mb := rt.watch.table[list[0].ID].owner.mb
	rt.watch.mu.Unlock()

	// Both queued while the duplex holds: the stop first, the restart
	// after it.
	mb.PostSystemMessage(&actor.Stop{})
	mb.PostSystemMessage(&actor.Restart{})
	releaseOnce()
	waitDrained(mb)

	if n := incarnations.Load(); n != 1 {
		t.Errorf("%d incarnations, want 1: a stopped duplex was restarted", n)
	}
	if list := rt.Actors(); len(list) != 0 {
		t.Errorf("Actors() = %+v after the stop, want none", list)
	}
	evMu.Lock()
	defer evMu.Unlock()
	var states []ActorState
	for _, ev := range events {
		states = append(states, ev.Actor.State)
	}
	if len(states) != 2 || states[0] != ActorRunning || states[1] != ActorStopped {
		t.Errorf("states reported %v, want running then stopped", states)
	}
}

// TestShell_RestartWhileStoppingIsDropped: a restart that reaches a
// duplex stopping, waiting for its child to stop, does not turn its stop
// into a restart: it stops, and its caller learns it.
func TestShell_RestartWhileStoppingIsDropped(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	rt := closedRuntime(t, nil)
	child, childEntered, releaseChild := holdingChild(t)
	var incarnations atomic.Int32
	spec := Spec{Name: "p", New: func() Logic {
		incarnations.Add(1)
		return LogicFunc(func(c Context, msg any) {
			if _, ok := msg.(Started); ok {
				ref, err := c.Spawn(child)
				if err != nil {
					c.Fail(err)
				}
				c.Send(ref, messages.Text("k", "hold"))
			}
		})
	}}
	conn, err := rt.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	<-childEntered
	list := rt.Actors()
	if len(list) != 2 {
		t.Fatalf("Actors() = %+v, want the duplex and its held child", list)
	}
	rt.watch.mu.Lock()
	mb := rt.watch.table[list[0].ID].owner.mb
	rt.watch.mu.Unlock()

	mb.PostSystemMessage(&actor.Stop{}) // waits for the held child
	mb.PostSystemMessage(&actor.Restart{})
	waitDrained(mb)
	releaseChild()
	if _, err := conn.Recv(testContext(t)); !errors.Is(err, ErrDuplexStopped) {
		t.Errorf("Recv: %v, want ErrDuplexStopped", err)
	}
	if n := incarnations.Load(); n != 1 {
		t.Errorf("%d incarnations, want 1: a stopping duplex was restarted", n)
	}
	if list := rt.Actors(); len(list) != 0 {
		t.Errorf("Actors() = %+v after the stop, want none", list)
	}
}
