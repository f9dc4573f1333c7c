package agent_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestClose_FromADeepCallInADelegationsHook: as
// TestClose_FromADelegationsHook, the hook closing the lead from a call
// 300 frames deep within it (a host's own layers: a framework, a
// recursive walk). How deep a hook calls Close does not matter: Close
// returns at once (no time passes) with an error wrapping
// ErrCloseContinues, and the lead's Run goes on to its answer.
func TestClose_FromADeepCallInADelegationsHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer := newAgent(t, rt, model(t, scripted.Turn{Text: "Written."}), &agent.Options{Name: "writer"})
		var lead *agent.Agent
		closed := make(chan error, 1)
		var waited time.Duration
		lead = delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			if ev.Kind == agent.EventDone {
				closed <- deep(300, func() error { return timedClose(context.Background(), lead, &waited) })
			}
		}})
		ans, err := lead.Run(context.Background(), "s", ask)
		if err != nil {
			t.Fatalf("the lead's Run: %v", err)
		}
		if err := <-closed; !errors.Is(err, agent.ErrCloseContinues) {
			t.Errorf("Close of the lead deep in its delegation's hook: %v, want ErrCloseContinues", err)
		}
		if waited != 0 {
			t.Errorf("Close deep in the delegation's hook took %v, want it at once", waited)
		}
		if res := onlyResult(t, ans); res.IsError || ans.Text != "The team is done." {
			t.Errorf("the delegation: %s (error %v), answer %q: want the writer's answer and the lead's", res.Content, res.IsError, ans.Text)
		}
	})
}

// deep calls f n frames deeper than its caller.
//
//go:noinline
func deep(n int, f func() error) error {
	if n == 0 {
		return f()
	}
	return deep(n-1, f)
}
