package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestClose_FromADelegationsHook: the delegation's ToolOptions.OnEvent
// hook, which gets no ctx, closes the lead with context.Background while
// the lead's Run waits for the delegation, which waits for the hook.
// Close sees that the Run waits for a handler of the lead's that ran
// before it began: after CancelGrace it returns nil (the delegation's
// call is not answered as timed out), the lead's Run goes on to its
// answer, and the lead refuses the next Run.
func TestClose_FromADelegationsHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer := newAgent(t, rt, model(t, scripted.Turn{Text: "Written."}), &agent.Options{Name: "writer"})
		var lead *agent.Agent
		closed := make(chan error, 1)
		lead = delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			if ev.Kind == agent.EventDone {
				closed <- lead.Close(context.Background())
			}
		}})
		start := time.Now()
		ans, err := lead.Run(context.Background(), "s", ask)
		if err != nil {
			t.Fatalf("the lead's Run: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close of the lead from its delegation's hook: %v, want nil", err)
		}
		if waited := time.Since(start); waited >= tools.DefaultTimeout {
			t.Errorf("the lead's Run took %v: Close from the hook waited for the call's timeout", waited)
		}
		if res := onlyResult(t, ans); res.IsError || ans.Text != "The team is done." {
			t.Errorf("the delegation: %s (error %v), answer %q: want the writer's answer and the lead's", res.Content, res.IsError, ans.Text)
		}
		if _, err := lead.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("the lead's Run after Close: %v, want ErrClosed", err)
		}
	})
}

// TestClose_FromAToolWithAnotherCtx: a tool of the agent closes it with a
// ctx not made from its call's, which Close cannot tell from a host's,
// and which ends before CancelGrace: Close waits for the Run, which
// waits for the call, until that ctx ends, and then fails with an error
// saying what it waited for and how a tool closes its agent.
func TestClose_FromAToolWithAnotherCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		var a *agent.Agent
		closed := make(chan error, 1)
		shutdown := tools.MustNew(tools.Definition{Name: "shutdown", Description: "Close the agent.",
			Handler: func(context.Context, json.RawMessage) (any, error) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				closed <- a.Close(ctx)
				return map[string]string{"closing": "yes"}, nil
			}})
		a = newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "shutdown", `{}`)}},
			scripted.Turn{Text: "Closed."},
		), &agent.Options{Name: "otherctx", Tools: []*tools.Tool{shutdown}, CancelGrace: 2 * time.Second})
		if _, err := a.Run(context.Background(), "s", ask); err != nil {
			t.Fatalf("the Run whose tool closed the agent: %v", err)
		}
		err := <-closed
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 conversation") ||
			!strings.Contains(err.Error(), "its call's ctx") {
			t.Errorf("Close from a tool with a ctx of its own: %v, want one wrapping its deadline, saying a conversation still ran and that a tool passes its call's ctx", err)
		}
	})
}
