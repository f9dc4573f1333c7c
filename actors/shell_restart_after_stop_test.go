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

	"github.com/asynkron/protoactor-go/persistence"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_RestartAfterStopDoesNotReviveTheDuplex: a supervisor decides
// to restart a failed duplex, and the duplex is stopped (its Conn
// closed) before the restart reaches it. protoactor carries out a
// restart whatever the actor's state, and starts a new incarnation:
// while the duplex waits for its children to stop, it would turn the
// stop into a restart (the duplex back although closed, its Close
// waiting in vain); once it has stopped for good, the new incarnation
// would run outside the process registry. Either way the duplex's Logic
// is started once only (a persistent one recovers once), the Close
// returns, and the Conn reads the failure's answer and then
// ErrDuplexStopped, no frame of a Logic started again.
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
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
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
	// A call sent now waits in d's mailbox, which the failure suspended.
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
	// The restart has been taken, and the late call if it is to be,
	// once d's mailbox is idle, its system messages taken and its user
	// messages too unless it is suspended (the restart of a duplex gone
	// cannot resume it: it is out of the process registry).
	for deadline := time.Now().Add(5 * time.Second); mb.status.Load() != mailboxIdle || mb.sysN.Load() != 0 ||
		!mb.suspended.Load() && mb.user.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("d's mailbox is not drained: running %v, %d user and %d system messages queued, suspended %v",
				mb.status.Load() != mailboxIdle, mb.user.Load(), mb.sysN.Load(), mb.suspended.Load())
		}
		runtime.Gosched()
	}

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
	if want := []string{"f:ERROR(boom)", "f:END"}; !slices.Equal(got, want) {
		t.Errorf("the Conn read %q, want %q", got, want)
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
