package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// The tests of this file check that an attempt waits for its loop's
// restart instead of being spent on a loop that refuses it meanwhile,
// and that a loop failing on every request still fails the Run.

// slowStop is a model wrapper whose first incarnation's end waits for
// release: the loop that owns it restarts only once it is released.
type slowStop struct {
	actors.Hooks
	ended   *atomic.Bool
	release <-chan struct{}
}

func (s slowStop) OnFailure(actors.WrapperContext, error) {
	if s.ended.CompareAndSwap(false, true) {
		<-s.release
	}
}

// restartingRun is a Stream whose agent's shared loop a sibling's
// failure restarted (all-for-one) during round 1, closing the attempt;
// the loop's model takes its time to stop, until release, and meanwhile
// the loop refuses every new call at once.
type restartingRun struct {
	a       *agent.Agent
	release func()
	done    chan restartingOutcome
}

type restartingOutcome struct {
	ans      *models.Answer
	err      error
	restarts int
}

// startRestartingRun starts the Stream in t's synctest bubble and
// returns once every goroutine waits (synctest.Wait): the loop restarts,
// and the Run has not returned.
func startRestartingRun(t *testing.T) *restartingRun {
	t.Helper()
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne})})
	sibling := startFailingSibling(t, rt)
	release := make(chan struct{})
	r := &restartingRun{release: sync.OnceFunc(func() { close(release) }), done: make(chan restartingOutcome, 1)}
	t.Cleanup(r.release)
	var ended atomic.Bool
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{call("c1", "hold", `{}`)}},
		{Text: "Done."},
	}}, nil)
	spec := actors.Wrap("slowstop", m.Spec("model"), func() actors.Wrapped { return slowStop{ended: &ended, release: release} })
	// hold blocks the first time, until the restart cancels it.
	started := make(chan struct{}, 1)
	var held atomic.Bool
	hold := tools.MustNew(tools.Definition{Name: "hold", Timeout: tools.NoTimeout,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if held.CompareAndSwap(false, true) {
				started <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return "held", nil
		}})
	r.a = newAgent(t, rt, spec, &agent.Options{Tools: []*tools.Tool{hold}, MaxAttempts: 2})
	go func() {
		var res restartingOutcome
		for ev, err := range r.a.Stream(context.Background(), "s1", ask) {
			res.ans, res.err = ev.Answer, err
			if ev.Kind == agent.EventRestart {
				res.restarts++
			}
		}
		r.done <- res
	}()
	<-started
	if err := sibling.Send(messages.Text("x", "fail")); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // the loop restarts: its model holds it up
	select {
	case res := <-r.done:
		t.Fatalf("the Run ended while its loop restarted: %v", res.err)
	default:
	}
	return r
}

// TestRun_WaitsForLoopRestart: a Run whose loop restarts (see
// startRestartingRun) waits for the loop to run again, and its next
// attempt gets the answer: it does not spend its attempts on the
// restarting loop.
func TestRun_WaitsForLoopRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRestartingRun(t)
		r.release()
		res := <-r.done
		if res.err != nil || res.ans == nil || res.ans.Text != "Done." || res.restarts != 1 {
			t.Fatalf("Run: %v after %d restarts, answer %s; want \"Done.\" after 1", res.err, res.restarts, describe(res.ans))
		}
	})
}

// TestRun_LoopRestartWaitEndsWithClose: a Run whose ctx has no deadline
// waits for its restarting loop (see startRestartingRun). Close ends that
// wait as soon as it begins: the Run returns ErrClosed, and Close, which
// then stops the loop, returns nil once the loop has stopped.
func TestRun_LoopRestartWaitEndsWithClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRestartingRun(t)
		closed := make(chan error, 1)
		go func() { closed <- r.a.Close(context.Background()) }()
		synctest.Wait()
		endedByClose(t, r.done, func(o restartingOutcome) error { return o.err }, "its restarting loop")
		r.release()
		if err := <-closed; err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// TestRun_LoopFailingOnEveryRequestFails: the loop fails as each
// attempt reaches it (its model crashes at once, which it escalates),
// before it gives the attempt anything; each restart is waited for, and
// each attempt counted: the Run fails after MaxAttempts.
func TestRun_LoopFailingOnEveryRequestFails(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var requests atomic.Int64
	spec := actors.Wrap("crashy", model(t, scripted.Turn{Text: "never"}), func() actors.Wrapped {
		return actors.Hooks{OnRequest: func(c actors.WrapperContext, f *messages.Frame) {
			if f.GetType() == messages.FrameType_END {
				requests.Add(1)
				panic("injected: the model crashes")
			}
			c.ToInner(f)
		}}
	})
	a := newAgent(t, rt, spec, &agent.Options{MaxAttempts: 3,
		Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts, EscalateWhenExceeded: true})})
	_, err := a.Run(testCtx(t), "s1", ask)
	var failed *agent.FailedError
	if !errors.As(err, &failed) || failed.Attempts != 3 || requests.Load() != 3 {
		t.Fatalf("Run: %v, the model got %d requests; want a FailedError after 3 attempts", err, requests.Load())
	}
}
