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

// TestClose_AgainInsideStreamBody: a Stream's loop body closes its
// agent, which returns nil once it cancelled that Stream, still in its
// body, CancelGrace later; a second Close from the same body, the first
// finished, returns the first's outcome at once rather than wait
// CancelGrace for that Stream again.
func TestClose_AgainInsideStreamBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		started, cancelled := make(chan string, 1), make(chan string, 1)
		a := newAgent(t, rt, model(t,
			scripted.Turn{Text: "Waiting.", ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
			scripted.Turn{Text: "unreachable"},
		), &agent.Options{Name: "closer", Tools: []*tools.Tool{blocker(started, cancelled)}})
		var first, second error
		var again time.Duration
		closed := false
		var streamErr error
		for ev, err := range a.Stream(context.Background(), "s", ask) {
			if err != nil {
				streamErr = err
			}
			if ev.Kind == agent.EventToolCall && !closed {
				closed = true
				first = a.Close(context.Background())
				start := time.Now()
				second = a.Close(context.Background())
				again = time.Since(start)
			}
		}
		if first != nil || second != nil {
			t.Errorf("Close, then Close again, in a Stream's loop body: %v, %v; want nil twice", first, second)
		}
		if again >= agent.DefaultCancelGrace {
			t.Errorf("the second Close took %v: it waited CancelGrace again for the Stream the first cancelled", again)
		}
		if !errors.Is(streamErr, agent.ErrClosed) {
			t.Errorf("the Stream: %v, want ErrClosed", streamErr)
		}
	})
}
