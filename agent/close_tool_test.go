package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestClose_FromItsOwnTool: a tool of the agent closes the agent, with
// its call's ctx, while the Run that called it waits for its result (a
// Run without a consumer, which Close otherwise waits for). Close cannot
// wait for that Run: it returns nil at once, the call gets the tool's own
// result (not a timeout), the Run goes on to its answer, a later Run is
// refused with ErrClosed, and the agent finishes closing once the Run
// has returned: with a Store, a new agent of the name then opens.
func TestClose_FromItsOwnTool(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeFromItsOwnTool(t, durable, false) })
		})
	}
}

// TestClose_FromItsOwnToolWithBackground: as TestClose_FromItsOwnTool, the
// tool closing the agent with context.Background instead of its call's
// ctx. Close cannot tell that ctx from a host's; it sees that the Run it
// waits for waits for a handler of the agent that was running before
// Close began, and after CancelGrace (shorter than the call's timeout)
// it stops waiting for it: Close returns nil, the call gets the tool's
// own result (not its timeout), and the agent finishes closing once the
// Run has returned.
func TestClose_FromItsOwnToolWithBackground(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeFromItsOwnTool(t, durable, true) })
		})
	}
}

// closeFromItsOwnTool runs a conversation whose tool closes the agent
// with its call's ctx, or with context.Background when background is
// set.
func closeFromItsOwnTool(t *testing.T, durable, background bool) {
	rt := actorstest.NewRuntime(t, nil)
	var a *agent.Agent
	closed := make(chan error, 1)
	shutdown := tools.MustNew(tools.Definition{Name: "shutdown", Description: "Close the agent.",
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if background {
				ctx = context.Background()
			}
			closed <- a.Close(ctx)
			return map[string]string{"closing": "yes"}, nil
		}})
	spec := model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "shutdown", `{}`)}},
		scripted.Turn{Text: "Closed."},
	)
	opts := &agent.Options{Name: "selfclose", Tools: []*tools.Tool{shutdown}}
	if durable {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		opts.Store = store
	}
	var err error
	if a, err = agent.New(rt, spec, opts); err != nil {
		t.Fatal(err)
	}
	ans, err := a.Run(context.Background(), "s", ask)
	if err != nil {
		t.Fatalf("the Run whose tool closed the agent: %v", err)
	}
	switch err := <-closed; {
	case background && !errors.Is(err, agent.ErrCloseContinues):
		t.Errorf("Close from the agent's own tool with another ctx: %v, want ErrCloseContinues", err)
	case !background && err != nil:
		t.Errorf("Close from the agent's own tool: %v, want nil", err)
	}
	if res := onlyResult(t, ans); res.IsError || ans.Text != "Closed." {
		t.Errorf("the call that closed the agent: %s (error %v), answer %q: want the tool's own result and the answer",
			res.Content, res.IsError, ans.Text)
	}
	if _, err := a.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	synctest.Wait() // the close finishes once the Run has returned
	if durable {
		if a2, err := agent.New(rt, spec, opts); err != nil {
			t.Errorf("New of the name once the agent closed from its tool has finished closing: %v", err)
		} else if err := a2.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}
	if err := a.Close(context.Background()); err != nil {
		t.Errorf("Close again: %v", err)
	}
}

// TestClose_FromAToolOfADelegation: the writer's tool, run in a
// delegation of the lead, closes the lead with its call's ctx: the
// lead's Run waits for the delegation, which waits for that call. Close
// returns nil at once, the writer answers, the lead's Run goes on to its
// answer, and the lead refuses the next Run.
func TestClose_FromAToolOfADelegation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		var lead *agent.Agent
		closed := make(chan error, 1)
		shutdown := tools.MustNew(tools.Definition{Name: "echo", Description: "Close the lead.",
			Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
				closed <- lead.Close(ctx)
				return map[string]string{"closing": "yes"}, nil
			}})
		writer := newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "echo", `{}`)}},
			scripted.Turn{Text: "Lead closed."},
		), &agent.Options{Name: "writer", Tools: []*tools.Tool{shutdown}})
		lead = delegatingLead(t, rt, writer, nil)
		ans, err := lead.Run(context.Background(), "s", ask)
		if err != nil {
			t.Fatalf("the lead's Run: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close of the lead from a tool of its delegation: %v, want nil", err)
		}
		if res := onlyResult(t, ans); res.IsError || ans.Text != "The team is done." {
			t.Errorf("the delegation: %s (error %v), answer %q: want the writer's answer and the lead's", res.Content, res.IsError, ans.Text)
		}
		if _, err := lead.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("the lead's Run after Close: %v, want ErrClosed", err)
		}
	})
}
