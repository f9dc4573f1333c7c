package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// waitingWriter returns a writer agent on rt whose model calls its tool
// "wait", whose handler closes started and returns once its call is
// cancelled.
func waitingWriter(t *testing.T, rt *actors.Runtime, started chan struct{}) *agent.Agent {
	t.Helper()
	wait := tools.MustNew(tools.Definition{Name: "wait", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	return newAgent(t, rt, model(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "wait", `{}`)}}, scripted.Turn{Text: "Never."}),
		&agent.Options{Name: "writer", Tools: []*tools.Tool{wait}})
}

// timedOutDelegation returns a lead agent on rt whose model calls, in
// one round, its tool "slow", whose handler takes 2 s (the bubble's
// time), and a delegation to a writer, timed out after 1 s (the writer
// waits for its own tool until cancelled), whose OnEvent hook, at the
// delegation's error, closes inHook and waits until hookGo is closed.
func timedOutDelegation(t *testing.T, rt *actors.Runtime) (lead *agent.Agent, slowStarted, inHook, hookGo chan struct{}) {
	t.Helper()
	writer := waitingWriter(t, rt, make(chan struct{}))
	inHook, hookGo = make(chan struct{}), make(chan struct{})
	delegation, err := agent.AsTool(writer, &agent.ToolOptions{Timeout: time.Second, OnEvent: func(_ string, ev agent.Event) {
		if ev.Kind == agent.EventError {
			close(inHook)
			<-hookGo
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	slowStarted = make(chan struct{})
	slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(slowStarted)
		select {
		case <-time.After(2 * time.Second): // a handler that takes that long (the bubble's time)
			return map[string]bool{"slow": true}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	lead = newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "slow", `{}`), call("c2", "writer", `{"task":"hi"}`)}},
		scripted.Turn{Text: "Both answered."}),
		&agent.Options{Name: "lead", Tools: []*tools.Tool{slow, delegation}})
	return lead, slowStarted, inHook, hookGo
}

// TestClose_HostWithATimedOutDelegationsHook: a host closes the lead
// while its Run waits for a handler that takes 2 s, begun before Close,
// and the OnEvent hook of a delegation whose call timed out (answered:
// the Run no longer waits for it) still runs, for longer than HookGrace.
// That hook holds none of the lead's conversations: Close waits for the
// long handler as it would without it, and returns nil once the Run has
// returned, rather than ErrCloseContinues once HookGrace has passed.
func TestClose_HostWithATimedOutDelegationsHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		lead, slowStarted, inHook, hookGo := timedOutDelegation(t, rt)
		defer close(hookGo)
		ran := runOf(lead, "s")
		<-slowStarted
		<-inHook // 1 s in: the delegation's call timed out, and its hook runs
		if err := <-closeOf(context.Background(), lead); err != nil {
			t.Errorf("the host's Close: %v, want nil once the Run has returned", err)
		}
		if err := <-ran; err != nil {
			t.Errorf("the lead's Run: %v", err)
		}
	})
}

// TestClose_FromTheHookOfACancelledDelegation: the host cancels the
// lead's Run while it waits for its delegation to the writer; the
// delegation's call is answered as cancelled and the Run returns, while
// the delegation's OnEvent hook, at its error, closes the lead with
// context.Background. What is left of the lead is that hook's handler,
// which waits for Close: Close waits for it HookGrace at most, not
// CancelGrace, and returns nil.
func TestClose_FromTheHookOfACancelledDelegation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		started := make(chan struct{})
		writer := waitingWriter(t, rt, started)
		var lead *agent.Agent
		closed := make(chan error, 1)
		var waited time.Duration
		lead = delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			if ev.Kind == agent.EventError {
				closed <- timedClose(context.Background(), lead, &waited)
			}
		}})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() {
			_, err := lead.Run(ctx, "s", ask)
			ran <- err
		}()
		<-started
		cancel()
		if err := <-ran; err == nil {
			t.Error("the lead's cancelled Run returned no error")
		}
		if err := <-closed; err != nil {
			t.Errorf("Close of the lead from its cancelled delegation's hook: %v, want nil", err)
		}
		if waited > agent.HookGrace {
			t.Errorf("Close from the cancelled delegation's hook took %v, want HookGrace (%v) at most", waited, agent.HookGrace)
		}
	})
}

// TestClose_HostAndHookAtOnce: a host closes the lead, with
// context.Background on a goroutine of its own, while the lead's Run
// waits for its delegation, whose OnEvent hook runs; the hook then
// closes the lead too. The hook's Close waits HookGrace at most and
// returns an error wrapping ErrCloseContinues; the host's returns nil or
// ErrCloseContinues (both wait as long for the same hook); the Run goes
// on to its answer once the hook has returned, Done is closed, and a
// Close then returns nil.
func TestClose_HostAndHookAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer := newAgent(t, rt, model(t, scripted.Turn{Text: "Written."}), &agent.Options{Name: "writer"})
		inHook, hostClosing := make(chan struct{}), make(chan struct{})
		hookClosed := make(chan error, 1)
		var lead *agent.Agent
		var waited time.Duration
		lead = delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) {
			if ev.Kind == agent.EventDone {
				close(inHook)
				<-hostClosing
				hookClosed <- timedClose(context.Background(), lead, &waited)
			}
		}})
		ran := runOf(lead, "s")
		<-inHook
		hostClosed := closeOf(context.Background(), lead)
		synctest.Wait() // the host's Close waits, while the hook runs
		close(hostClosing)
		if err := <-hookClosed; !errors.Is(err, agent.ErrCloseContinues) {
			t.Errorf("the hook's Close: %v, want ErrCloseContinues", err)
		}
		if waited > agent.HookGrace {
			t.Errorf("the hook's Close took %v, want HookGrace (%v) at most", waited, agent.HookGrace)
		}
		if err := <-hostClosed; err != nil && !errors.Is(err, agent.ErrCloseContinues) {
			t.Errorf("the host's Close: %v, want nil or ErrCloseContinues", err)
		}
		if err := <-ran; err != nil {
			t.Errorf("the lead's Run: %v", err)
		}
		<-lead.Done()
		if err := lead.Close(context.Background()); err != nil {
			t.Errorf("Close once Done is closed: %v, want nil", err)
		}
	})
}
