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
// the lead's Run waits for the delegation, which waits for the hook;
// also from a call 300 frames deep within the hook (a host's own layers:
// a framework, a recursive walk): how deep does not matter. Close sees
// that a hook holding the lead's conversation runs, and that the Run
// waits for a handler of the lead's that is in its hook since before
// Close began: it waits for the hook no longer than HookGrace and
// returns an error wrapping ErrCloseContinues (the delegation's call is
// not answered as timed out), the lead's Run goes on to its answer, the
// lead refuses the next Run, and Done is closed.
func TestClose_FromADelegationsHook(t *testing.T) {
	for _, tc := range []struct {
		name  string
		depth int
	}{{"in the hook", 0}, {"300 frames deep in the hook", 300}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeFromDelegationsHook(t, tc.depth) })
		})
	}
}

func closeFromDelegationsHook(t *testing.T, depth int) {
	rt := actorstest.NewRuntime(t, nil)
	writer := newAgent(t, rt, model(t, scripted.Turn{Text: "Written."}), &agent.Options{Name: "writer"})
	var lead *agent.Agent
	closed := make(chan error, 1)
	var waited time.Duration
	lead = delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
		if ev.Kind == agent.EventDone {
			closed <- deep(depth, func() error { return timedClose(context.Background(), lead, &waited) })
		}
	}})
	ans, err := lead.Run(context.Background(), "s", ask)
	if err != nil {
		t.Fatalf("the lead's Run: %v", err)
	}
	if err := <-closed; !errors.Is(err, agent.ErrCloseContinues) {
		t.Errorf("Close of the lead from its delegation's hook: %v, want ErrCloseContinues", err)
	}
	if waited > agent.HookGrace {
		t.Errorf("Close from the delegation's hook took %v, want HookGrace (%v) at most", waited, agent.HookGrace)
	}
	if res := onlyResult(t, ans); res.IsError || ans.Text != "The team is done." {
		t.Errorf("the delegation: %s (error %v), answer %q: want the writer's answer and the lead's", res.Content, res.IsError, ans.Text)
	}
	if _, err := lead.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("the lead's Run after Close: %v, want ErrClosed", err)
	}
	<-lead.Done() // the close finishes in the background
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

// TestClose_SubFromTheHookOfADelegationToIt: the OnEvent hook of a
// delegation made to the writer closes the writer, with
// context.Background, at the delegation's first event (its round's tool
// call, whose handler returns only once the call is cancelled), while
// the writer's conversation waits for that hook. Close returns nil once
// HookGrace has passed (the conversation, a delegation, is cancelled as
// Close begins, and waited for in its hook no longer than HookGrace);
// once the hook has returned
// the delegation ends with an error wrapping ErrClosed, which the hook
// sees last, the lead's Run goes on to its answer with the call's error
// result, and the writer refuses the next Run.
func TestClose_SubFromTheHookOfADelegationToIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		note := tools.MustNew(tools.Definition{Name: "note", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done() // until the cancelled conversation's ABORT: it never answers
			return nil, ctx.Err()
		}})
		writer := newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "note", `{}`)}}, // the conversation is not over at its first event
			scripted.Turn{Text: "Written."},
		), &agent.Options{Name: "writer", Tools: []*tools.Tool{note}})
		closed := make(chan error, 1)
		var (
			waited time.Duration
			events []agent.Event
		)
		lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			events = append(events, ev) // the delegation's events, one at a time
			if len(events) == 1 {
				closed <- timedClose(context.Background(), writer, &waited)
			}
		}})
		ans, err := lead.Run(context.Background(), "s", ask)
		if err != nil {
			t.Fatalf("the lead's Run: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close of the writer from the hook of a delegation to it: %v, want nil", err)
		}
		if waited > agent.HookGrace {
			t.Errorf("Close from the hook took %v, want HookGrace (%v) at most", waited, agent.HookGrace)
		}
		if res := onlyResult(t, ans); !res.IsError || !strings.Contains(string(res.Content), "closed") || ans.Text != "The team is done." {
			t.Errorf("the delegation: %s (error %v), answer %q: want its error saying the writer was closed, and the lead's answer",
				res.Content, res.IsError, ans.Text)
		}
		if last := events[len(events)-1]; last.Kind != agent.EventError || !strings.Contains(last.Text, agent.ErrClosed.Error()) {
			t.Errorf("the hook's last event: %v %q, want an EventError saying the writer was closed", last.Kind, last.Text)
		}
		if _, err := writer.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
			t.Errorf("the writer's Run after Close: %v, want ErrClosed", err)
		}
		synctest.Wait() // the writer's close is done once its conversation has returned
		if err := writer.Close(context.Background()); err != nil {
			t.Errorf("Close of the writer again: %v", err)
		}
	})
}

// timedClose closes a with ctx and sets *waited to the time Close took
// (the bubble's time: none passes while it does not wait).
func timedClose(ctx context.Context, a *agent.Agent, waited *time.Duration) error {
	start := time.Now()
	err := a.Close(ctx)
	*waited = time.Since(start)
	return err
}

// TestClose_HostAsADelegationsHookBegins: a host closes the lead, with
// context.Background on a goroutine of its own, while the lead's Run
// waits for its delegation to the writer, which waits for a tool call of
// its own: no hook runs, and Close waits (for CancelGrace) for the
// delegation's handler, which began before it. The call returns and the
// delegation's OnEvent hook begins, and blocks until Close has returned:
// the hook holds the lead's conversation, and Close, which looks again as
// it begins, waits for it no longer than HookGrace and returns an error
// wrapping ErrCloseContinues. Once the hook returns, the lead's Run goes on to its
// answer and Done is closed.
func TestClose_HostAsADelegationsHookBegins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer, started, release := noteWriter(t, rt, scripted.Turn{Text: "Written."})
		closed, hookRelease := make(chan error, 1), make(chan struct{})
		lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			if ev.Kind == agent.EventDone {
				<-hookRelease // a host's hook waiting for what only Close's return lets go on
			}
		}})
		ran := runOf(lead, "s")
		<-started
		var waited time.Duration
		go func() { closed <- timedClose(context.Background(), lead, &waited) }()
		synctest.Wait() // Close waits for the delegation's handler
		close(release)
		err := <-closed
		close(hookRelease)
		if !errors.Is(err, agent.ErrCloseContinues) {
			t.Errorf("the host's Close: %v, want ErrCloseContinues", err)
		}
		if waited > agent.HookGrace {
			t.Errorf("the host's Close took %v once the delegation's hook began, want HookGrace (%v) at most", waited, agent.HookGrace)
		}
		if err := <-ran; err != nil {
			t.Errorf("the lead's Run: %v", err)
		}
		<-lead.Done()
	})
}
