package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// TestAgents_EmbeddedInHostTree: agents in a runtime embedded in a host's
// own actor system, under a host actor. An agent's loop failing past its
// restart intensity escalates to the host's own supervisor strategy,
// which sees the failure; stopping the host actor stops every agent, each
// running conversation returning with its started tool call answered and
// cancelled; nothing is left running once the host shuts its system down.
func TestAgents_EmbeddedInHostTree(t *testing.T) {
	system := actorstest.HostSystem(t)
	ctx := testCtx(t)
	var mu sync.Mutex
	var seen []string // what the host's strategy was asked about
	hostStrategy := actor.NewOneForOneStrategy(10, time.Minute, func(reason any) actor.Directive {
		mu.Lock()
		seen = append(seen, fmt.Sprint(supervisor.ReasonError(reason)))
		mu.Unlock()
		return actor.StopDirective
	})
	ready := make(chan *actors.Runtime, 1)
	embed := func(name string) (*actor.PID, *actors.Runtime) {
		t.Helper()
		strategy := supervisor.MustNew(&supervisor.Options{MaxRestarts: 1, Within: time.Minute, EscalateWhenExceeded: true})
		props := actor.PropsFromProducer(func() actor.Actor {
			return &actorstest.Embedder{Opts: actors.RuntimeOptions{Supervision: strategy}, Ready: ready}
		}, actor.WithSupervisor(hostStrategy))
		pid, err := system.Root.SpawnNamed(props, name)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case rt := <-ready:
			t.Cleanup(func() { _ = rt.Close(context.Background()) })
			return pid, rt
		case <-ctx.Done():
			t.Fatal("the host did not embed the runtime")
		}
		return nil, nil
	}

	// Escalation: the model calls a tool at every turn and the agent's
	// loop panics at every tool result; its second failure exceeds the
	// intensity and reaches the host.
	_, rt := embed("app")
	always, err := scripted.New(scripted.Script{Repeat: true,
		Turns: []scripted.Turn{{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	crashing, err := agent.New(rt, always.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil)}, MaxAttempts: 5, OnToolResult: func(tools.ToolResultEvent) {
		panic("injected: the loop crashed")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crashing.Run(ctx, "s1", ask); err == nil {
		t.Fatal("a loop that always crashes answered")
	}
	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	if !strings.Contains(got, "injected: the loop crashed") {
		t.Fatalf("the host's strategy saw %q, want the loop's escalated panic", got)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatalf("close after the host stopped the runtime: %v", err)
	}

	// Stopping the host's subtree stops every agent mid-conversation.
	host, rt := embed("app2")
	const n = 5
	started, cancelled := make(chan string, n), make(chan string, n)
	type outcome struct {
		results []models.ToolResult // the results the stream showed
		err     error
	}
	outcomes := make(chan outcome, n)
	for i := range n {
		a, err := agent.New(rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
			scripted.Turn{Text: "never"},
		), &agent.Options{Tools: []*tools.Tool{blocker(started, cancelled)}, MaxAttempts: i % 2}) // 0: the default; 1: no second attempt
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			var o outcome
			for ev, err := range a.Stream(ctx, fmt.Sprint("s", i), ask) {
				if ev.Kind == agent.EventToolResult {
					o.results = append(o.results, ev.Result)
				}
				o.err = err
			}
			outcomes <- o
		}()
	}
	for range n {
		<-started
	}
	if err := system.Root.StopFuture(host).Wait(); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case o := <-outcomes:
			if !errors.Is(o.err, actors.ErrDuplexStopped) {
				t.Fatalf("a conversation of a stopped host returned %v, want ErrDuplexStopped", o.err)
			}
			if len(o.results) != 1 || o.results[0].CallID != "c1" || !o.results[0].IsError {
				t.Fatalf("the started call was not answered once with an error: %+v", o.results)
			}
		case <-ctx.Done():
			t.Fatal("a conversation did not return after the host stopped")
		}
		select {
		case <-cancelled:
		case <-ctx.Done():
			t.Fatal("a started tool call was not cancelled")
		}
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRun_DurableSessionStopsWithTheHost: with a Store, each conversation
// runs on a loop of its own. Stopping the host actor mid-call stops every
// such conversation, its Run failing with an error wrapping
// ErrDuplexStopped: no next attempt starts a fresh loop under the
// stopping host, resumes the session and runs the model's next calls.
// A race (the next attempt against the host's stop): run with -count.
func TestRun_DurableSessionStopsWithTheHost(t *testing.T) {
	system := actorstest.HostSystem(t)
	ctx := testCtx(t)
	ready := make(chan *actors.Runtime, 1)
	host, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &actorstest.Embedder{Ready: ready}
	}), "app")
	if err != nil {
		t.Fatal(err)
	}
	rt := <-ready
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })

	const n = 6
	started, cancelled := make(chan string, n), make(chan string, n)
	var hostStopping atomic.Bool
	var ranAfterStop atomic.Int32
	after := tools.MustNewTyped(tools.Definition{Name: "after"},
		func(context.Context, struct{}) (string, error) {
			if hostStopping.Load() {
				ranAfterStop.Add(1)
			}
			return "ran", nil
		})
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c2", "after", `{}`)}},
		scripted.Turn{Text: "the end"},
	), &agent.Options{Store: store, Tools: []*tools.Tool{blocker(started, cancelled), after}})
	type outcome struct {
		ans *models.Answer
		err error
	}
	outcomes := make(chan outcome, n)
	for i := range n {
		go func() {
			ans, err := a.Run(ctx, fmt.Sprint("s", i), ask)
			outcomes <- outcome{ans, err}
		}()
	}
	for range n {
		<-started
	}
	// Set before the stop: a conversation may only go on after it if the
	// host's stop did not stop it.
	hostStopping.Store(true)
	if err := system.Root.StopFuture(host).Wait(); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case o := <-outcomes:
			if !errors.Is(o.err, actors.ErrDuplexStopped) {
				t.Errorf("a durable conversation of a stopped host returned %v (answer %q), want an error wrapping ErrDuplexStopped",
					o.err, o.ans.Text)
			}
			var fe *agent.FailedError
			if !errors.As(o.err, &fe) {
				t.Errorf("error %v is not a *FailedError", o.err)
			}
		case <-ctx.Done():
			t.Fatal("a conversation did not return after the host stopped")
		}
	}
	if got := ranAfterStop.Load(); got != 0 {
		t.Errorf("the tool \"after\" ran %d time(s) once the host had begun to stop the runtime", got)
	}
}
