package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
)

// startFailingSibling starts on rt a duplex "sibling" that fails on a
// frame of text "fail": under all-for-one, its failure restarts an
// agent's shared loop.
func startFailingSibling(t *testing.T, rt *actors.Runtime) *actors.Conn {
	t.Helper()
	sibling, err := rt.Start(actors.Spec{Name: "sibling", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetText() == "fail" {
				c.Fail(errors.New("injected: the sibling fails"))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sibling
}

// failingSiblingOnRequest is a model that answers "Done.", wrapped so that
// each of its first failures requests, counted in requests, calls failSibling
// and waits: the restart the sibling's failure brings closes it.
func failingSiblingOnRequest(t *testing.T, requests *atomic.Int64, failures int64, failSibling func()) actors.Spec {
	return actors.Wrap("trigger", model(t, scripted.Turn{Text: "Done."}), func() actors.Wrapped {
		return actors.Hooks{OnRequest: func(c actors.WrapperContext, f *messages.Frame) {
			if f.GetType() == messages.FrameType_END {
				if n := requests.Add(1); n <= failures {
					failSibling()
					return // the request waits; the restart closes it
				}
			}
			c.ToInner(f)
		}}
	})
}

// TestRun_SiblingFailingEachRequestBoundsAttempts: under the default
// all-for-one intensity (10 restarts in 10 s), a sibling that fails 2 s
// (fake time) after each request reaches the model restarts the shared
// loop during every attempt, 30 times, before the model may answer. The
// supervisor's intensity is a rate, not a total: it never stops the
// loop. The first attempt is counted, each later one is not, and the Run
// fails with ErrLoopRestarting once MaxUncountedAttempts were not
// counted, instead of going on for as long as the sibling fails.
func TestRun_SiblingFailingEachRequestBoundsAttempts(t *testing.T) {
	for _, tc := range []struct{ maxUncounted, want int }{
		{0, agent.DefaultMaxUncountedAttempts},
		{3, 3},
	} {
		t.Run(fmt.Sprintf("MaxUncountedAttempts=%d", tc.maxUncounted), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne})})
				sibling := startFailingSibling(t, rt)
				const siblingFailures = 30
				var requests atomic.Int64
				spec := failingSiblingOnRequest(t, &requests, siblingFailures, func() {
					time.AfterFunc(2*time.Second, func() { _ = sibling.Send(messages.Text("x", "fail")) })
				})
				a := newAgent(t, rt, spec, &agent.Options{MaxAttempts: 2, MaxUncountedAttempts: tc.maxUncounted})
				ans, err := a.Run(context.Background(), "s1", ask)
				var fe *agent.FailedError
				if !errors.As(err, &fe) || !errors.Is(err, agent.ErrLoopRestarting) ||
					!strings.Contains(err.Error(), agent.ErrLoopRestarting.Error()) || fe.Attempts != 1 || fe.Uncounted != tc.want ||
					requests.Load() != int64(1+tc.want) {
					t.Fatalf("Run: %v (answer %q) after %d requests; want a FailedError for ErrLoopRestarting after 1 attempt counted and %d not",
						err, ans.Text, requests.Load(), tc.want)
				}
			})
		})
	}
}

// TestNew_RejectsNegativeMaxUncountedAttempts: a negative bound is a
// mistake, not "no bound".
func TestNew_RejectsNegativeMaxUncountedAttempts(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	if a, err := agent.New(rt, model(t, scripted.Turn{Text: "Done."}), &agent.Options{MaxUncountedAttempts: -1}); err == nil {
		_ = a.Close(context.Background())
		t.Fatal("New accepted MaxUncountedAttempts -1")
	}
}

// TestRun_AttemptClosedByRestartNotCounted: a sibling's failure
// (all-for-one) restarts the loop while attempts 2 to 4 wait for the
// model: each is closed by the restart before the loop served it, which
// the doc says is not counted. With MaxAttempts 2 the Run gets the answer
// at attempt 5. The agent reads the loop's restarts as soon as the ERROR
// and END arrive, so the runtime must have counted the restart by then.
// A race: run it many times (-count=1000 under -race) to see it fail.
func TestRun_AttemptClosedByRestartNotCounted(t *testing.T) {
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne, MaxRestarts: 100})})
	sibling := startFailingSibling(t, rt)
	const siblingFailures = 4
	var requests atomic.Int64
	spec := failingSiblingOnRequest(t, &requests, siblingFailures, func() { _ = sibling.Send(messages.Text("x", "fail")) })
	a := newAgent(t, rt, spec, &agent.Options{MaxAttempts: 2})
	ans, err := a.Run(testCtx(t), "s1", ask)
	if err != nil || ans.Text != "Done." {
		t.Fatalf("Run: %v after %d requests; want \"Done.\" after %d", err, requests.Load(), siblingFailures+1)
	}
}
