package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/persistence"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
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
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
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
	mb := firstMailbox(t, rt, 1)

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
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
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
	mb := firstMailbox(t, rt, 2) // the duplex, then its held child

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

// firstMailbox returns the mailbox of the first of rt's actors, once it
// has checked that rt runs n actors.
func firstMailbox(t *testing.T, rt *Runtime, n int) *mailbox {
	t.Helper()
	list := rt.Actors()
	if len(list) != n {
		t.Fatalf("Actors() = %+v, want %d", list, n)
	}
	rt.watch.mu.Lock()
	defer rt.watch.mu.Unlock()
	return rt.watch.table[list[0].ID].owner.mb
}

// TestShell_RestartAfterStopDoesNotReviveTheDuplex: a supervisor decides
// to restart a failed duplex, and the duplex is stopped (its Conn
// closed) before the restart reaches it. protoactor carries out a
// restart whatever the actor's state, and starts a new incarnation:
// while the duplex waits for its children to stop, it would turn the
// stop into a restart (the duplex back although closed, its Close
// waiting in vain); once it has stopped for good, the new incarnation
// would run outside the process registry. Either way the duplex's Logic
// is started once only (a persistent one recovers once), the Close
// returns, and the Conn reads the failure's answer, the refusal of a
// call written while the duplex stops if it takes that call before it
// has stopped (see TestShell_CallToFailedStoppingDuplexIsRefused), and
// then ErrDuplexStopped, no frame of a Logic started again.
func TestShell_RestartAfterStopDoesNotReviveTheDuplex(t *testing.T) {
	for _, c := range []struct {
		child, persistent bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		t.Run(fmt.Sprintf("child=%v,persistent=%v", c.child, c.persistent), func(t *testing.T) {
			testRestartAfterStop(t, c.child, c.persistent)
		})
	}
}

func testRestartAfterStop(t *testing.T, child, persistent bool) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	var provider persistence.Provider
	if persistent {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		p, err := durability.NewProvider(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		provider = p
	}
	// The host, deciding to restart "d", waits for proceed before it
	// carries the decision out.
	decided, proceed := make(chan struct{}), make(chan struct{})
	var decidedOnce sync.Once
	rt := closedRuntime(t, &RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
		if ev.Directive == supervisor.Restart && strings.HasSuffix(ev.Child, "/d") {
			decidedOnce.Do(func() { close(decided); <-proceed })
		}
	}})
	releaseHost := sync.OnceFunc(func() { close(proceed) })
	t.Cleanup(releaseHost) // before the runtime is closed
	// "d", taking its stop, waits for resume before it stops its
	// children (its Stopping reports its end to the actor watchers).
	stopping, resume := make(chan struct{}), make(chan struct{})
	var stoppingOnce sync.Once
	t.Cleanup(rt.WatchActors(func(ev ActorEvent) {
		if ev.Actor.State == ActorStopped && strings.HasSuffix(ev.Actor.ID, "/d") {
			stoppingOnce.Do(func() { close(stopping); <-resume })
		}
	}))
	releaseStop := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(releaseStop)

	logic := &reviveLogic{child: child, mb: make(chan *mailbox, 1)}
	conn, err := rt.Start(Spec{Name: "d", Persistence: provider, New: func() Logic { return logic }})
	if err != nil {
		t.Fatal(err)
	}
	mb := <-logic.mb
	if err := conn.Send(messages.Text("f", "fail")); err != nil {
		t.Fatal(err)
	}
	<-decided // d failed; the host waits to restart it
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed <- conn.Close(ctx)
	}()
	<-stopping // d has taken the stop, its children not stopped yet
	// A call sent now waits in d's mailbox until d has taken the stop.
	if err := conn.Send(messages.Text("z", "late")); err != nil {
		t.Fatal(err)
	}
	releaseHost() // the restart is sent to d, queued behind the stop
	// The host takes a spawn request once it has carried its decision
	// out: then the restart is queued at d.
	other, err := rt.Start(Duplex("other", func(*messages.Frame, func(*messages.Frame)) {}))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	releaseStop() // d stops its child, if it has one, then takes the restart
	if err := <-closed; err != nil {
		t.Errorf("Close of a duplex whose restart came after its stop: %v", err)
	}
	// The restart has been taken, and the late call, once d's mailbox is idle, its system messages taken and its user
	// messages too (the stop took d's mailbox out of the suspension its
	// failure put it in).
	waitSettled(mb)

	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			if !errors.Is(err, ErrDuplexStopped) {
				t.Errorf("Recv after Close: %v, want ErrDuplexStopped", err)
			}
			break
		}
		got = append(got, f.GetStreamId()+":"+frameName(f))
	}
	frames := []string{"f:ERROR(boom)", "f:END"}
	if len(got) > len(frames) {
		// d took the late call while its child still stopped: refused.
		// Once d has stopped, nothing is emitted (no child: at once).
		frames = append(frames, "z:ERROR("+stoppingText+")", "z:END")
	}
	if !slices.Equal(got, frames) {
		t.Errorf("the Conn read %q, want %q", got, frames)
	}
	if n := logic.starts.Load(); n != 1 {
		t.Errorf("the Logic was started %d times, want 1: a restart that came after the stop revived the duplex", n)
	}
	want := int32(0)
	if persistent {
		want = 1 // its one incarnation
	}
	if n := logic.replays.Load(); n != want {
		t.Errorf("the Logic recovered %d times, want %d", n, want)
	}
}

// reviveLogic counts its starts and its recoveries; it spawns a child
// "k" as it starts when child is set, answers a TEXT with TEXT "served"
// and END, but fails ("boom") on TEXT "fail". Its first incarnation
// sends its mailbox to mb.
type reviveLogic struct {
	child           bool
	mb              chan *mailbox
	starts, replays atomic.Int32
}

func (l *reviveLogic) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		if l.starts.Add(1) == 1 {
			l.mb <- c.(*shell).mb
		}
		if l.child {
			if _, err := c.Spawn(Duplex("k", func(*messages.Frame, func(*messages.Frame)) {})); err != nil {
				c.Fail(err)
			}
		}
	case *persistence.ReplayComplete:
		l.replays.Add(1)
	case *messages.Frame:
		if m.GetText() == "fail" {
			c.Fail(errors.New("boom"))
		}
		c.Emit(messages.Text(m.GetStreamId(), "served"))
		c.Emit(messages.End(m.GetStreamId()))
	}
}

// waitSettled waits until mb is idle with its system messages taken, and
// its user messages too unless it is suspended (as waitDrained does for
// a mailbox that is not).
func waitSettled(mb *mailbox) {
	for mb.status.Load() != mailboxIdle || mb.sysN.Load() != 0 || !mb.suspended.Load() && mb.user.Load() != 0 {
		runtime.Gosched()
	}
}
