package agent_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestClose_WaitsForItsDelegationsToReturn: the lead's Run is cancelled
// while it delegates to the writer, so its call is answered as cancelled
// at once while the delegation still winds down (its handler gives
// ToolOptions.OnEvent the delegation's last event). The lead's Close,
// which stops the lead's loop and with it the delegation's, does not
// return while that handler still runs: a host that closed its lead gets
// no late event. It waits for it CancelGrace at most (a hook that never
// returns does not hold Close).
func TestClose_WaitsForItsDelegationsToReturn(t *testing.T) {
	for _, hookReturns := range []bool{true, false} {
		name := "hook returns"
		if !hookReturns {
			name = "hook hangs"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeWaitsForDelegations(t, hookReturns) })
		})
	}
}

func closeWaitsForDelegations(t *testing.T, hookReturns bool) {
	const grace = time.Second
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 1)
	writer := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "wait", `{}`)}},
		scripted.Turn{Text: "unreachable"},
	), &agent.Options{Name: "writer", Tools: []*tools.Tool{blocker(started, cancelled)}})
	inHook, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	tool, err := agent.AsTool(writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
		if ev.Kind == agent.EventError && ev.Frame == nil { // the delegation's last event
			close(inHook)
			<-release
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	lead, err := agent.New(rt, model(t, leadTurns()...), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}, CancelGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { _, err := lead.Run(ctx, "s", ask); ran <- err }()
	<-started
	cancel()
	<-ran
	closed := closeOf(context.Background(), lead)
	<-inHook
	notReturned(t, closed, "the lead's Close, while its delegation's handler runs,")
	start := time.Now()
	if hookReturns {
		release <- struct{}{}
	}
	if err := <-closed; err != nil {
		t.Fatalf("the lead's Close: %v", err)
	}
	if waited := time.Since(start); hookReturns && waited != 0 || !hookReturns && waited > grace {
		t.Errorf("the lead's Close returned %v after the hook could return, want at once (within CancelGrace %v for a hook that hangs)", waited, grace)
	}
}
