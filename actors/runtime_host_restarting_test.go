package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// TestRuntime_SpawnWhileHostRestarts: a runtime embedded under a host
// actor whose strategy restarts all its children (AllForOne) when one
// fails; a sibling of the runtime's host fails, and the host restarts,
// waiting for a duplex busy in a turn to stop. A spawn request the host
// takes meanwhile is held, not answered: spawned then, the duplex would
// be a child the restart never stopped, and the restart would wait for
// it forever. Once the restart is complete, the request is served by the
// new incarnation, and its duplex runs. A stop of the host while it
// restarts refuses the requests held with ErrHostStopped.
func TestRuntime_SpawnWhileHostRestarts(t *testing.T) {
	for _, stop := range []bool{false, true} {
		name := "restart completes"
		if stop {
			name = "host stopped"
		}
		t.Run(name, func(t *testing.T) {
			rt, release := restartingHost(t)

			ran := make(chan struct{})
			replies := make(chan spawnReply, 1)
			rt.system.Root.Send(rt.host, &spawnRequest{spec: Spec{Name: "late", New: func() Logic {
				return LogicFunc(func(_ Context, msg any) {
					if _, ok := msg.(*messages.Frame); ok {
						close(ran)
					}
				})
			}}, reply: replies, gone: rt.hostGone})
			waitDrained(rt.hostCell.mb)
			if len(replies) > 0 {
				r := <-replies
				release()
				t.Fatalf("the host answered a spawn while it restarted (%v, %v): its duplex is a child the restart does not stop", r.pid, r.err)
			}
			closed := make(chan error, 1)
			if stop {
				go func() { closed <- rt.Close(context.Background()) }()
			} else {
				release()
			}
			var r spawnReply
			select {
			case r = <-replies:
			case <-testContext(t).Done():
				t.Fatal("the spawn held while the host restarted got no answer")
			}
			if stop {
				release()
				if !errors.Is(r.err, ErrHostStopped) {
					t.Errorf("spawn held while the host restarted, then stopped: %v, want ErrHostStopped", r.err)
				}
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("spawn held while the host restarted: %v", r.err)
			}
			if n := rt.hostCell.mb.incarnations; n != 2 {
				t.Errorf("the spawn was answered by the host's incarnation %d, want the restarted one (2)", n)
			}
			rt.system.Root.Send(r.pid, messages.Text("s", "work"))
			select {
			case <-ran:
			case <-testContext(t).Done():
				t.Fatal("the duplex spawned after the restart got no frame")
			}
		})
	}
}

// restartableHost starts an actor system of its own and a runtime
// embedded under a host actor "app" whose strategy restarts all its
// children when one fails, and returns the runtime and the runtime
// host's sibling, which panics on a string. The runtime is closed, and
// the system shut down and checked for leaks, at the test's end.
func restartableHost(t *testing.T) (*Runtime, *actor.PID) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	t.Cleanup(func() {
		system.Shutdown()
		leakcheck.VerifyNone(t, before)
	})
	type started struct {
		rt      *Runtime
		sibling *actor.PID
		err     error
	}
	ready := make(chan started, 1)
	strategy := actor.NewAllForOneStrategy(10, time.Minute, func(any) actor.Directive { return actor.RestartDirective })
	props := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			rt, err := NewRuntime(&RuntimeOptions{Parent: c})
			sibling := c.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(string); ok {
					panic("boom")
				}
			}))
			ready <- started{rt, sibling, err}
		}
	}, actor.WithSupervisor(strategy))
	if _, err := system.Root.SpawnNamed(props, "app"); err != nil {
		t.Fatal(err)
	}
	s := <-ready
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return s.rt, s.sibling
}

// TestRuntime_StartGivenUpWhileHostRestarts: a Start whose request the
// restarting host holds (see TestRuntime_SpawnWhileHostRestarts) and
// whose wait ends first (SpawnTimeout) fails, and starts nothing: once
// the restart is complete, the request is not served (its duplex would
// run with nobody knowing of it), and its duplex's name is free.
func TestRuntime_StartGivenUpWhileHostRestarts(t *testing.T) {
	rt, release := restartingHost(t)
	rt.spawnTimeout = time.Millisecond
	late := Spec{Name: "late", New: func() Logic { return LogicFunc(func(Context, any) {}) }}
	if _, err := rt.Start(late); err == nil {
		release()
		t.Fatal("Start while the host restarts, held past its SpawnTimeout, succeeded")
	}
	release()
	replies := make(chan spawnReply, 1)
	rt.system.Root.Send(rt.host, &spawnRequest{spec: late, reply: replies, gone: rt.hostGone})
	var r spawnReply
	select {
	case r = <-replies:
	case <-testContext(t).Done():
		t.Fatal("no answer to a spawn after the restart")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got, want := r.pid.GetId(), "app/polyweave/late"; got != want {
		t.Errorf("duplex spawned after the restart is %s, want %s: the Start given up started one", got, want)
	}
}

// restartingHost starts a runtime as restartableHost does with a duplex
// busy in a turn, and makes the runtime host restart (a sibling
// fails), waiting for the busy duplex to stop. release lets it stop.
func restartingHost(t *testing.T) (rt *Runtime, release func()) {
	t.Helper()
	rt, sibling := restartableHost(t)
	entered, released := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	mbs := make(chan *mailbox, 1)
	conn, err := rt.Start(Spec{Name: "busy", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch msg.(type) {
			case Started:
				mbs <- c.(*shell).mb
			case *messages.Frame:
				close(entered)
				<-released
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	busy := <-mbs
	if err := conn.Send(messages.Text("s", "work")); err != nil {
		t.Fatal(err)
	}
	<-entered
	rt.system.Root.Send(sibling, "boom")
	waitQueued(busy, 0, 1) // the host restarts: its Stop waits for the busy turn
	return rt, release
}

// TestRuntime_StartsGivenUpWhileHostRestartsHeldNoMore: the requests of
// Starts that gave up waiting while the host restarts (SpawnTimeout) are
// not kept until the restart ends: a long restart that takes many
// Starts holds no more requests than callers still waiting, not one per
// Start ever made.
func TestRuntime_StartsGivenUpWhileHostRestartsHeldNoMore(t *testing.T) {
	rt, release := restartingHost(t)
	defer release()
	rt.spawnTimeout = time.Millisecond
	const starts = 256
	for i := range starts {
		if _, err := rt.Start(Spec{Name: "late", New: func() Logic { return LogicFunc(func(Context, any) {}) }}); err == nil {
			t.Fatalf("Start %d while the host restarts, held past its SpawnTimeout, succeeded", i)
		}
	}
	waitDrained(rt.hostCell.mb)
	if n := len(rt.hostCell.held); n > starts/8 {
		t.Errorf("the restarting host holds %d spawn requests after %d Starts that all gave up: want those of waiting callers only", n, starts)
	}
}
