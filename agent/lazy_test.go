package agent_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// started records every duplex of rt that starts running, from now on.
type started struct {
	mu  sync.Mutex
	ran []actors.ActorInfo
}

func watchStarts(t *testing.T, rt *actors.Runtime) *started {
	s := &started{}
	stop := rt.WatchActors(func(ev actors.ActorEvent) {
		if ev.Actor.State == actors.ActorRunning && ev.Actor.Restarts == 0 {
			s.mu.Lock()
			s.ran = append(s.ran, ev.Actor)
			s.mu.Unlock()
		}
	})
	t.Cleanup(stop)
	return s
}

// under returns the names of the actors started as children of parent.
func (s *started) under(parent string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, a := range s.ran {
		if a.Parent == parent {
			names = append(names, a.Name)
		}
	}
	return names
}

// topLevel returns the IDs of rt's live actors under its host.
func topLevel(rt *actors.Runtime) []string {
	var ids []string
	for _, a := range rt.Actors() {
		if a.Parent == rt.Host().Id {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// TestLazy_AgentUsedAsToolStartsNoLoop: building agents starts no actor,
// and an agent used only as another agent's tool never starts a loop of
// its own under the runtime: its delegations run under the lead's tool.
func TestLazy_AgentUsedAsToolStartsNoLoop(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	starts := watchStarts(t, rt)
	writer := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "I echoed hi."},
	), &agent.Options{Name: "writer", Tools: []*tools.Tool{echo(nil)}})
	tool, err := agent.AsTool(writer, nil)
	if err != nil {
		t.Fatal(err)
	}
	lead := newAgent(t, rt, model(t, leadTurns()...), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}})
	if live := rt.Actors(); len(live) != 0 {
		t.Fatalf("actors before any Run: %+v, want none", live)
	}
	ans, err := lead.Run(testCtx(t), "team", []models.Message{models.UserMessage("Get hi echoed.")})
	if err != nil {
		t.Fatal(err)
	}
	if res := onlyResult(t, ans); res.IsError || ans.Text != "The team is done." {
		t.Fatalf("result %s, answer %q: want the writer's delegation answered", res.Content, ans.Text)
	}
	host := rt.Host().Id
	if got := strings.Join(starts.under(host), ","); got != "lead" {
		t.Fatalf("started under the runtime: %q, want the lead's loop alone", got)
	}
	if got := strings.Join(starts.under(host+"/lead/tool-writer"), ","); got != "writer" {
		t.Fatalf("started under the lead's writer tool: %q, want the writer's delegation loop", got)
	}
	if got := strings.Join(topLevel(rt), ","); got != host+"/lead" {
		t.Fatalf("live under the runtime: %q, want the lead's loop alone", got)
	}
}

// TestLazy_ConcurrentFirstRunsStartOneLoop: the first Runs of an agent,
// made at once on different sessions, start one loop and all run on it;
// Close stops it.
func TestLazy_ConcurrentFirstRunsStartOneLoop(t *testing.T) {
	const n = 32
	rt := actorstest.NewRuntime(t, nil)
	starts := watchStarts(t, rt)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hello."}), &agent.Options{Name: "greeter"})
	ctx := testCtx(t)
	begin := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			ans, err := a.Run(ctx, fmt.Sprint("s", i), ask)
			if err == nil && ans.Text != "Hello." {
				err = fmt.Errorf("answer %+v", ans)
			}
			errs[i] = err
		}()
	}
	close(begin)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if got := starts.under(rt.Host().Id); len(got) != 1 || got[0] != "greeter" {
		t.Fatalf("loops started by %d first Runs: %q, want one", n, got)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if live := rt.Actors(); len(live) != 0 {
		t.Fatalf("actors after Close: %+v, want none", live)
	}
}

// TestLazy_StartErrorReachesEveryCaller: when the loop cannot start (the
// runtime is closed), every Run waiting for it gets the start's error,
// naming the agent.
func TestLazy_StartErrorReachesEveryCaller(t *testing.T) {
	const n = 8
	rt := actorstest.NewRuntime(t, nil)
	if err := rt.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hello."}), &agent.Options{Name: "late"})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = a.Run(testCtx(t), fmt.Sprint("s", i), ask)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, actors.ErrClosed) || !strings.Contains(fmt.Sprint(err), `agent "late": start its loop`) {
			t.Fatalf("run %d: %v, want the start's error (the runtime is closed) naming the agent", i, err)
		}
	}
}

// TestLazy_CloseBeforeAnyRun: agents closed before any Run, durable or
// not, started nothing and leave nothing behind; Close stays idempotent
// and later Runs fail with ErrClosed.
func TestLazy_CloseBeforeAnyRun(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	before := goleak.IgnoreCurrent()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "sessions.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := model(t, scripted.Turn{Text: "Hello."})
	plain, err := agent.New(rt, spec, &agent.Options{Name: "plain", Tools: []*tools.Tool{echo(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	durable, err := agent.New(rt, spec, &agent.Options{Name: "durable", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if live := rt.Actors(); len(live) != 0 {
		t.Fatalf("actors of agents never run: %+v, want none", live)
	}
	ctx := testCtx(t)
	for _, a := range []*agent.Agent{plain, durable} {
		for range 2 {
			if err := a.Close(ctx); err != nil {
				t.Fatalf("close %s: %v", a.Name(), err)
			}
		}
		if _, err := a.Run(ctx, "s1", ask); !errors.Is(err, agent.ErrClosed) {
			t.Fatalf("run of closed %s: %v, want ErrClosed", a.Name(), err)
		}
	}
	if live := rt.Actors(); len(live) != 0 {
		t.Fatalf("actors after Close: %+v, want none", live)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	leakcheck.VerifyNone(t, before)
}

// TestLazy_CloseDuringFirstRun: a Close racing the first Run either keeps
// it out (ErrClosed) or waits for it and stops the loop it started.
func TestLazy_CloseDuringFirstRun(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hello."}), nil)
	ctx := testCtx(t)
	ran := make(chan error, 1)
	go func() {
		ans, err := a.Run(ctx, "s1", ask)
		if err == nil && ans.Text != "Hello." {
			err = fmt.Errorf("answer %+v", ans)
		}
		ran <- err
	}()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if live := rt.Actors(); len(live) != 0 {
		t.Fatalf("actors after Close: %+v, want none", live)
	}
	if err := <-ran; err != nil && !errors.Is(err, agent.ErrClosed) {
		t.Fatalf("run racing Close: %v, want its answer or ErrClosed", err)
	}
}

// TestLazy_CloseAgainAfterItGaveUp: a Close whose ctx ends while a
// conversation runs reports so, and a later Close, once the conversation
// returned, still stops the loop that conversation started.
func TestLazy_CloseAgainAfterItGaveUp(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 1)
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
		scripted.Turn{Text: "never"},
	), &agent.Options{Name: "slow", Tools: []*tools.Tool{blocker(started, cancelled)}})
	ctx, stopRun := context.WithCancel(testCtx(t))
	ran := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, "s1", ask)
		ran <- err
	}()
	<-started
	gaveUp, cancel := context.WithCancel(testCtx(t))
	cancel()
	if err := a.Close(gaveUp); !errors.Is(err, context.Canceled) {
		t.Fatalf("close while a conversation runs, its ctx ended: %v, want context.Canceled", err)
	}
	stopRun()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want context.Canceled", err)
	}
	if err := a.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if live := rt.Actors(); len(live) != 0 {
		t.Fatalf("actors after the second Close: %+v, want none", live)
	}
}

// TestSharedLoop_StoppedForGoodIsNotRestarted: a started shared loop
// that its supervisor stops for good (here: at its first failure) is not
// started again: the Run under way when it stopped fails, and every
// later Run fails at once with actors.ErrDuplexStopped; Close
// still succeeds.
func TestSharedLoop_StoppedForGoodIsNotRestarted(t *testing.T) {
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts})})
	m := scripted.MustNew(scripted.Script{Repeat: true, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"text":"hi"}`}}}}}, nil)
	a, err := agent.New(rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil)},
		OnToolResult: func(tools.ToolResultEvent) { panic("injected: the loop crashed") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	defer func() {
		if err := a.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := a.Run(ctx, "s1", ask); err == nil {
		t.Fatal("the Run whose loop stopped answered")
	}
	for _, id := range []string{"s1", "s2"} {
		if _, err := a.Run(ctx, id, ask); !errors.Is(err, actors.ErrDuplexStopped) || !strings.Contains(err.Error(), `agent "agent"`) || !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
			t.Fatalf("a later Run of %s: %v, want ErrDuplexStopped naming the agent and the session", id, err)
		}
	}
}

// slowEnd is a Logic whose end (failure, restart or stop) waits for
// release after its own FailureHandler ran: the duplex's parent, stopping,
// waits for it.
type slowEnd struct {
	actors.Logic
	release <-chan struct{}
}

func (s slowEnd) OnFailure(c actors.Context, err error) {
	if h, ok := s.Logic.(actors.FailureHandler); ok {
		h.OnFailure(c, err)
	}
	<-s.release
}

// TestSharedLoop_RunOnStoppingLoopFailsAsStopped: a Run whose shared loop
// is stopping for good (its supervisor gave up at its first failure, and
// its model child has not finished) meets a loop that refuses its calls as
// stopped. It makes no further attempt (the loop is not started again)
// and fails as on a stopped loop: an error wrapping ErrDuplexStopped that
// names the agent and the session. The model child finishes only once
// the Run has returned, so the loop is stopping during the whole Run.
func TestSharedLoop_RunOnStoppingLoopFailsAsStopped(t *testing.T) {
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts})})
	m := scripted.MustNew(scripted.Script{Repeat: true, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "echo", Arguments: `{"text":"hi"}`}}}}}, nil)
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	spec := m.Spec("model")
	inner := spec.New
	spec.New = func() actors.Logic { return slowEnd{Logic: inner(), release: release} }
	a, err := agent.New(rt, spec, &agent.Options{Tools: []*tools.Tool{echo(nil)},
		OnToolResult: func(tools.ToolResultEvent) { panic("injected: the loop crashed") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	defer func() {
		releaseOnce() // the model child finishes, and the loop stops
		if err := a.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	restarts := 0
	var runErr error
	for ev, err := range a.Stream(ctx, "s1", ask) {
		if ev.Kind == agent.EventRestart {
			restarts++
		}
		runErr = err
	}
	if !errors.Is(runErr, actors.ErrDuplexStopped) || !strings.Contains(runErr.Error(), `agent "agent"`) || !strings.Contains(runErr.Error(), `"s1"`) {
		t.Errorf("the Run whose loop is stopping for good: %v, want ErrDuplexStopped naming the agent and the session", runErr)
	}
	// At most the restart after the crash: none once the loop refused a
	// call as stopped.
	if restarts > 1 {
		t.Errorf("the Run made %d restarts, want at most 1 (after the crash)", restarts)
	}
}
