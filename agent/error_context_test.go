package agent_test

// Goes in agent/. Run: go test -race -count=1 -run TestRun_ClosedAndBusyErrorsNameTheAgent ./agent/
// Fix: wrap as every other Run error does: fmt.Errorf("agent %q: session %q: %w", name, clip(id), ErrSessionBusy / ErrClosed); errors.Is keeps working.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRun_ClosedAndBusyErrorsNameTheAgent: with many agents in one
// host, "agent: closed" and `agent: session busy: "s"` do not say which
// agent refused (every other error of Run names it: `agent "writer":
// session "s": ...`). A lead's delegation result then reads "the writer
// agent failed: agent: closed" only because AsTool adds the name.
func TestRun_ClosedAndBusyErrorsNameTheAgent(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 1)
	a := newAgent(t, rt, model(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}}),
		&agent.Options{Name: "writer", Tools: []*tools.Tool{blocker(started, cancelled)}})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = a.Run(ctx, "s", ask) }()
	<-started
	_, busy := a.Run(testCtx(t), "s", ask)
	cancel()
	<-cancelled
	<-done
	if err := a.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	_, closed := a.Run(testCtx(t), "s2", ask)
	for _, err := range []error{busy, closed} {
		if err == nil || !errors.Is(err, agent.ErrSessionBusy) && !errors.Is(err, agent.ErrClosed) {
			t.Fatalf("unexpected %v", err)
		}
		if !strings.Contains(err.Error(), `"writer"`) {
			t.Errorf("%q does not name the agent", err)
		}
	}
}
