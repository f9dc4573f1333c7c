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
	"github.com/polyweave/polyweave-go/tools"
)

// TestClose_FromANestedDelegationsHook: the top agent delegates to an
// editor, which delegates to a writer; the ToolOptions.OnEvent hook of
// the writer's delegation closes the top agent, whose Run waits for the
// editor, which waits for the writer, which waits for the hook. That
// goroutine holds a conversation of the top agent as much as the hook of
// a delegation the top agent made itself: Close waits for it no longer
// than HookGrace and returns an error wrapping ErrCloseContinues, and the
// top agent's Run goes on to its answer.
func TestClose_FromANestedDelegationsHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer := newAgent(t, rt, model(t, scripted.Turn{Text: "Written."}), &agent.Options{Name: "writer"})
		var top *agent.Agent
		closed := make(chan error, 1)
		var waited time.Duration
		toWriter, err := agent.AsTool(writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			if ev.Kind == agent.EventDone {
				// Shorter than the calls' timeout: a Close that waits for
				// the top agent's Run fails before a call times out.
				ctx, cancel := context.WithTimeout(context.Background(), tools.DefaultTimeout/2)
				defer cancel()
				closed <- timedClose(ctx, top, &waited)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		editor := newAgent(t, rt, model(t, leadTurns()...), &agent.Options{Name: "editor", Tools: []*tools.Tool{toWriter}})
		toEditor, err := agent.AsTool(editor, nil)
		if err != nil {
			t.Fatal(err)
		}
		top = newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("e1", "editor", `{"task":"have it written"}`)}},
			scripted.Turn{Text: "Published."},
		), &agent.Options{Name: "top", Tools: []*tools.Tool{toEditor}})
		ans, err := top.Run(context.Background(), "s", ask)
		if err != nil {
			t.Fatalf("the top agent's Run: %v", err)
		}
		if err := <-closed; !errors.Is(err, agent.ErrCloseContinues) {
			t.Errorf("Close of the top agent from the hook of a delegation under its delegation: %v, want ErrCloseContinues", err)
		}
		if waited > agent.HookGrace {
			t.Errorf("Close from the hook took %v, want HookGrace (%v) at most", waited, agent.HookGrace)
		}
		if res := onlyResult(t, ans); res.IsError || ans.Text != "Published." {
			t.Errorf("the delegation: %s (error %v), answer %q: want the editor's answer and the top agent's", res.Content, res.IsError, ans.Text)
		}
	})
}
