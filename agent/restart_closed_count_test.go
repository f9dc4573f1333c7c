package agent_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestRun_AttemptClosedByRestartNotCounted: a sibling's failure
// (all-for-one) restarts the loop while attempts 2 to 4 wait for the
// model: each is closed by the restart before the loop served it, which
// the doc says is not counted. With MaxAttempts 2 the Run gets the answer
// at attempt 5. The agent reads the loop's restarts as soon as the ERROR
// and END arrive, so the runtime must have counted the restart by then.
// A race: run it many times (-count=1000 under -race) to see it fail.
func TestRun_AttemptClosedByRestartNotCounted(t *testing.T) {
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne, MaxRestarts: 100})})
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
	const siblingFailures = 4
	var requests atomic.Int64
	spec := actors.Wrap("trigger", model(t, scripted.Turn{Text: "Done."}), func() actors.Wrapped {
		return actors.Hooks{OnRequest: func(c actors.WrapperContext, f *messages.Frame) {
			if f.GetType() == messages.FrameType_END {
				if n := requests.Add(1); n <= siblingFailures {
					_ = sibling.Send(messages.Text("x", "fail"))
					return // the request waits; the restart closes it
				}
			}
			c.ToInner(f)
		}}
	})
	a := newAgent(t, rt, spec, &agent.Options{MaxAttempts: 2})
	ans, err := a.Run(testCtx(t), "s1", ask)
	if err != nil || ans.Text != "Done." {
		t.Fatalf("Run: %v after %d requests; want \"Done.\" after %d", err, requests.Load(), siblingFailures+1)
	}
}
