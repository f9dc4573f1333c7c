package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestRuntime_UniqueNames: many duplexes of one spec (and wrappers of it)
// start side by side under their default names, each numbered after the
// first; they all answer on their own.
func TestRuntime_UniqueNames(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := testCtx(t)
	var conns []*actors.Conn
	for range 5 {
		for _, spec := range []actors.Spec{upper(), actors.Wrap("wrapped", upper(), func() actors.Wrapped { return actors.Hooks{} })} {
			conn, err := rt.Start(spec)
			if err != nil {
				t.Fatalf("start %q: %v", spec.Name, err)
			}
			conns = append(conns, conn)
		}
	}
	var names []string
	for i, conn := range conns {
		names = append(names, conn.Ref().PID().GetId())
		id := fmt.Sprint(i)
		if err := conn.SendAll(messages.Text(id, "x"), messages.End(id)); err != nil {
			t.Fatal(err)
		}
		got, err := conn.RecvStream(ctx, id)
		if err != nil || !slices.Equal(texts(got), []string{"X", "<END>"}) {
			t.Fatalf("duplex %s: %q, %v", names[i], texts(got), err)
		}
	}
	if names[0] != "polyweave/upper" || names[1] != "polyweave/wrapped" {
		t.Fatalf("first names %q", names[:2])
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("name %q given twice in %q", n, names)
		}
		seen[n] = true
	}
}

// TestRuntime_DurableNames: a durable duplex keeps its name: a second one
// of the same name, or a wrapper around one, fails with ErrNameTaken while
// the first runs; one without a name fails with ErrNoName.
func TestRuntime_DurableNames(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	provider, err := durability.NewProvider(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, nil)
	journal := actors.Spec{Name: "journal", Persistence: provider, New: func() actors.Logic { return &journalLogic{} }}
	if !journal.Durable() {
		t.Fatal("persistent spec not durable")
	}
	if _, err := rt.Start(journal); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Start(journal); !errors.Is(err, actors.ErrNameTaken) {
		t.Fatalf("second durable start: %v, want ErrNameTaken", err)
	}
	outer := actors.Wrap("outer", journal, func() actors.Wrapped { return actors.Hooks{} })
	if !outer.Durable() || !actors.Pipe("p", upper(), journal).Durable() || upper().Durable() {
		t.Fatal("Durable does not follow what a spec owns")
	}
	if _, err := rt.Start(outer); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Start(outer); !errors.Is(err, actors.ErrNameTaken) {
		t.Fatalf("second wrapper of a durable duplex: %v, want ErrNameTaken", err)
	}
	journal.Name = ""
	if _, err := rt.Start(journal); !errors.Is(err, actors.ErrNoName) {
		t.Fatalf("durable start without a name: %v, want ErrNoName", err)
	}
}

// TestRuntime_EmbeddedInHostTree: a runtime built on a host's actor system
// as a child of a host actor. A duplex failing past its restart intensity
// escalates to the host actor's supervisor strategy, which sees the
// failure; stopping the host actor stops every duplex, each open stream
// answered with ERROR and END; the host's system keeps running until the
// host shuts it down, and nothing is left running.
func TestRuntime_EmbeddedInHostTree(t *testing.T) {
	system := actorstest.HostSystem(t)
	ctx := testCtx(t)
	failures := make(chan error, 10)
	var mu sync.Mutex
	var decided []string
	hostStrategy := actor.NewOneForOneStrategy(10, time.Minute, func(reason any) actor.Directive {
		mu.Lock()
		decided = append(decided, fmt.Sprint(reason))
		mu.Unlock()
		failures <- supervisor.ReasonError(reason)
		return actor.StopDirective
	})
	ready := make(chan *actors.Runtime, 2)
	events := make(chan supervisor.Event, 100)
	await := func() *actors.Runtime {
		t.Helper()
		select {
		case rt := <-ready:
			t.Cleanup(func() { rt.Close(context.Background()) })
			return rt
		case err := <-failures:
			t.Fatalf("host failed to embed the runtime: %v", err)
		case <-ctx.Done():
			t.Fatal("host did not embed the runtime")
		}
		return nil
	}
	spawnHost := func(name string, max int) *actor.PID {
		strategy := supervisor.MustNew(&supervisor.Options{MaxRestarts: max, Within: time.Minute, EscalateWhenExceeded: true})
		props := actor.PropsFromProducer(func() actor.Actor {
			return &actorstest.Embedder{Opts: actors.RuntimeOptions{Supervision: strategy, OnSupervision: func(e supervisor.Event) { events <- e }},
				Ready: ready}
		}, actor.WithSupervisor(hostStrategy))
		pid, err := system.Root.SpawnNamed(props, name)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}

	// Escalation past the intensity reaches the host's strategy.
	spawnHost("app", 1)
	rt := await()
	if got := rt.Host().GetId(); got != "app/polyweave" {
		t.Fatalf("runtime host %q, want app/polyweave", got)
	}
	conn, err := rt.Start(upper())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		id := fmt.Sprint("crash", i)
		if err := conn.Send(messages.Text(id, "crash")); err != nil {
			t.Fatal(err)
		}
		if got, err := conn.RecvStream(ctx, id); err != nil || !slices.Equal(texts(got), []string{"<ERROR>", "<END>"}) {
			t.Fatalf("stream %s: %q, %v", id, texts(got), err)
		}
	}
	select {
	case err := <-failures:
		var p *actors.PanicError
		if !errors.As(err, &p) {
			t.Fatalf("host saw %v, want the duplex's panic", err)
		}
	case <-ctx.Done():
		t.Fatal("the host's strategy saw no escalation")
	}
	var last supervisor.Event
	for len(events) > 0 {
		last = <-events
	}
	if last.Directive != supervisor.Escalate || !last.IntensityExceeded {
		t.Fatalf("last runtime event %+v, want escalate with intensity exceeded", last)
	}
	if _, err := conn.Recv(ctx); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("recv after the host stopped the runtime: %v", err)
	}
	if _, err := rt.Start(upper()); err == nil {
		t.Fatal("start on a stopped host succeeded")
	} else {
		t.Logf("start: %v", err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatalf("close after the host stopped it: %v", err)
	}

	// Stopping the host's subtree stops every duplex and answers open
	// streams.
	host := spawnHost("app2", 5)
	rt = await()
	var conns []*actors.Conn
	started := make(chan struct{}, 3)
	for i := range 3 {
		conn, err := rt.Start(actors.Spec{Name: "slow", New: func() actors.Logic { return slowLogic{started: started} }})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Send(messages.Text(fmt.Sprint("open", i), "work")); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for range 3 {
		<-started
	}
	if err := system.Root.StopFuture(host).Wait(); err != nil {
		t.Fatal(err)
	}
	for i, conn := range conns {
		got, err := conn.RecvStream(ctx, fmt.Sprint("open", i))
		if err != nil || !slices.Equal(texts(got), []string{"<ERROR>", "<END>"}) {
			t.Fatalf("open stream %d after the host stopped: %q, %v", i, texts(got), err)
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if _, err := system.Root.RequestFuture(system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(string); ok {
			c.Respond("still up")
		}
	})), "ping", time.Second).Result(); err != nil {
		t.Fatalf("host system after the runtime closed: %v", err)
	}
}
