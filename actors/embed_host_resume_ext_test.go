package actors_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// embedEscalating embeds a runtime under a host actor "app" whose
// strategy decides directive about the runtime's top-level supervisor;
// the runtime escalates a duplex's first failure to it. decided gets a
// value for each decision.
func embedEscalating(t *testing.T, directive actor.Directive) (rt *actors.Runtime, decided <-chan struct{}) {
	t.Helper()
	system := actorstest.HostSystem(t)
	ctx := testCtx(t)
	decisions := make(chan struct{}, 10)
	hostStrategy := actor.NewOneForOneStrategy(10, time.Minute, func(reason any) actor.Directive {
		decisions <- struct{}{}
		return directive
	})
	ready := make(chan *actors.Runtime, 1)
	strategy := supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts, EscalateWhenExceeded: true})
	props := actor.PropsFromProducer(func() actor.Actor {
		return &actorstest.Embedder{Opts: actors.RuntimeOptions{Supervision: strategy}, Ready: ready}
	}, actor.WithSupervisor(hostStrategy))
	if _, err := system.Root.SpawnNamed(props, "app"); err != nil {
		t.Fatal(err)
	}
	select {
	case rt = <-ready:
		t.Cleanup(func() { rt.Close(context.Background()) })
	case <-ctx.Done():
		t.Fatal("host did not embed the runtime")
	}
	return rt, decisions
}

// crashUnder starts upper in rt, crashes it on stream crash0 and waits
// for the host actor's decision.
func crashUnder(t *testing.T, rt *actors.Runtime, decided <-chan struct{}) *actors.Conn {
	t.Helper()
	conn, err := rt.Start(upper())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("crash0", "crash")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-decided:
	case <-testCtx(t).Done():
		t.Fatal("the host's strategy saw no escalation")
	}
	return conn
}

// TestEmbeddedHostResume_AnswersFailedCall: a runtime embedded under a
// host actor (RuntimeOptions.Parent) escalates a duplex's failure past its
// intensity to the host actor's strategy (the default with a Parent), which
// decides Resume. As a duplex's own supervisor resuming it does, and a
// duplex parent resumed after escalating its child's failure, the
// runtime's top-level supervisor, resumed, resumes the duplex: the
// failed call is answered (FailedKind), the next served. It resumed
// nothing, and the duplex stayed suspended: its failed call got no
// result and every later call waited, until Close.
//
// The duplex, reported failed (ActorFailed) since the escalation, is
// then reported running again, by Runtime.Actors (what agent's wait for
// a restart reads) and to WatchActors: it stayed "failed", as nothing
// but a restart or a stop changed the state an escalation set.
func TestEmbeddedHostResume_AnswersFailedCall(t *testing.T) {
	rt, decided := embedEscalating(t, actor.ResumeDirective)
	var mu sync.Mutex
	last := map[string]actors.ActorState{} // as the watchers were last told
	stop := rt.WatchActors(func(ev actors.ActorEvent) {
		mu.Lock()
		last[ev.Actor.ID] = ev.Actor.State
		mu.Unlock()
	})
	defer stop()
	conn := crashUnder(t, rt, decided)
	ctx := testCtx(t)
	wait, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	got, err := conn.RecvStream(wait, "crash0")
	if err != nil || !slices.Equal(texts(got), []string{"<ERROR>", "<END>"}) {
		t.Errorf("failed call after the host resumed the runtime: %q, %v; want ERROR and END (one result)", texts(got), err)
	} else if k := got[0].GetMeta().GetFailureKind(); k != actors.FailedKind {
		t.Errorf("failed call's ERROR has failure kind %q, want %q", k, actors.FailedKind)
	}
	if err := conn.SendAll(messages.Text("n", "hi"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	wait2, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	got, err = conn.RecvStream(wait2, "n")
	if err != nil || !slices.Equal(texts(got), []string{"HI", "<END>"}) {
		t.Errorf("next call after the host resumed the runtime: %q, %v; want HI and END", texts(got), err)
	}
	id := conn.Ref().String()
	for _, ai := range rt.Actors() {
		if ai.ID == id && ai.State != actors.ActorRunning {
			t.Errorf("Actors() reports the duplex as %v after it was resumed and served a call; want %v", ai.State, actors.ActorRunning)
		}
	}
	mu.Lock()
	if s := last[id]; s != actors.ActorRunning {
		t.Errorf("the last event WatchActors got about the duplex says %v after it was resumed; want %v", s, actors.ActorRunning)
	}
	mu.Unlock()
}

// TestEmbeddedHostRestart_ServesAfter: the host actor's strategy
// restarts the runtime's top-level supervisor after it escalated a
// duplex's failure: the duplex is stopped with it (its failed call
// closed), and the restarted supervisor serves: a duplex started after
// answers. (Its mailbox must take the restart's own resume as such, not
// as a stale decision about the incarnation that ended.)
func TestEmbeddedHostRestart_ServesAfter(t *testing.T) {
	rt, decided := embedEscalating(t, actor.RestartDirective)
	conn := crashUnder(t, rt, decided)
	ctx := testCtx(t)
	got, err := conn.RecvStream(ctx, "crash0")
	if err != nil || !slices.Equal(texts(got), []string{"<ERROR>", "<END>"}) {
		t.Errorf("failed call after the host restarted the runtime: %q, %v; want ERROR and END", texts(got), err)
	}
	wait, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	next, err := startWithin(wait, rt)
	if err != nil {
		t.Fatalf("Start after the host restarted the runtime: %v", err)
	}
	if err := next.SendAll(messages.Text("n", "hi"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	got, err = next.RecvStream(wait, "n")
	if err != nil || !slices.Equal(texts(got), []string{"HI", "<END>"}) {
		t.Errorf("call after the host restarted the runtime: %q, %v; want HI and END", texts(got), err)
	}
}

// startWithin starts upper in rt, or fails when ctx ends first (Start
// waits for the host up to the runtime's spawn timeout).
func startWithin(ctx context.Context, rt *actors.Runtime) (*actors.Conn, error) {
	type result struct {
		conn *actors.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := rt.Start(upper())
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
