package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// noteWriter returns a writer agent on rt whose first turn calls its
// tool "note", whose handler closes started and waits until release is
// closed, and whose next turn is last.
func noteWriter(t *testing.T, rt *actors.Runtime, last scripted.Turn) (writer *agent.Agent, started, release chan struct{}) {
	t.Helper()
	started, release = make(chan struct{}), make(chan struct{})
	note := tools.MustNew(tools.Definition{Name: "note", Handler: func(context.Context, json.RawMessage) (any, error) {
		close(started)
		<-release
		return nil, nil
	}})
	writer = newAgent(t, rt, model(t, scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "note", `{}`)}}, last),
		&agent.Options{Name: "writer", Tools: []*tools.Tool{note}})
	return writer, started, release
}

// runOf runs a's session on ask on a goroutine of its own and returns
// a channel that gets the Run's error.
func runOf(a *agent.Agent, session string) <-chan error {
	ran := make(chan error, 1)
	go func() {
		_, err := a.Run(context.Background(), session, ask)
		ran <- err
	}()
	return ran
}

// blockingHook returns a delegation's OnEvent hook that, at its first
// event, closes entered and waits until release is closed; it returns at
// once at every later event, which it counts in *events.
func blockingHook(entered, release chan struct{}, events *int) func(string, agent.Event) {
	var once sync.Once
	return func(string, agent.Event) {
		*events++
		once.Do(func() {
			close(entered)
			<-release
		})
	}
}

// TestClose_HostDuringAStreamingDelegation: a host closes the lead, with
// context.Background on a goroutine of its own, while the lead's Run
// waits for its delegation to the writer, whose OnEvent hook runs (it
// streams the writer's events to a UI, say). The hook returns within
// HookGrace, and the writer streams its answer in many quick events,
// each a call of the hook: Close does not take a hook for its caller, it
// waits for the conversation, and returns nil once the Run has returned.
func TestClose_HostDuringAStreamingDelegation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer, started, release := noteWriter(t, rt, scripted.Turn{Text: "Written, word by word, for the UI to show.", Deltas: 20})
		inHook, hookGo := make(chan struct{}), make(chan struct{})
		events := 0
		lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: blockingHook(inHook, hookGo, &events)})
		ran := runOf(lead, "s")
		<-inHook
		<-started
		closed := closeOf(context.Background(), lead)
		synctest.Wait() // Close waits, while the hook runs
		close(hookGo)
		close(release)
		if err := <-closed; err != nil {
			t.Errorf("the host's Close during a streaming delegation: %v, want nil once the Run has returned", err)
		}
		if err := <-ran; err != nil {
			t.Errorf("the lead's Run: %v", err)
		}
		if events < 20 {
			t.Errorf("the hook got %d events, want the writer's answer streamed in 20 deltas", events)
		}
		select {
		case <-lead.Done():
		default:
			t.Error("Done is not closed after a Close that returned nil")
		}
	})
}

// TestClose_HostWithAHookAndALongHandler: a host closes the lead while
// one of its conversations waits for a tool call whose handler takes 2 s
// (longer than HookGrace, shorter than CancelGrace) and another waits for
// a delegation whose OnEvent hook runs. The hook returns within
// HookGrace: Close waits for the long handler as it would without the
// hook, and returns nil once both Runs have returned.
func TestClose_HostWithAHookAndALongHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		writer := newAgent(t, rt, model(t, scripted.Turn{Text: "Written.", Deltas: 3}), &agent.Options{Name: "writer"})
		inHook, hookGo := make(chan struct{}), make(chan struct{})
		events := 0
		delegation, err := agent.AsTool(writer, &agent.ToolOptions{OnEvent: blockingHook(inHook, hookGo, &events)})
		if err != nil {
			t.Fatal(err)
		}
		slowStarted := make(chan struct{})
		slow := tools.MustNew(tools.Definition{Name: "slow", Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			close(slowStarted)
			select {
			case <-time.After(2 * time.Second): // a handler that takes that long (the bubble's time)
				return map[string]bool{"slow": true}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}})
		m, err := scripted.New(scripted.Script{Turns: []scripted.Turn{ // one request at a time, in this order
			{ToolCalls: []scripted.ToolCall{call("c1", "slow", `{}`)}},              // s1
			{ToolCalls: []scripted.ToolCall{call("c2", "writer", `{"task":"hi"}`)}}, // s2
			{Text: "The writer is done."},                                           // s2, once the hook returned
			{Text: "The slow one is done."},                                         // s1, 2 s in
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		lead := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "lead", Tools: []*tools.Tool{slow, delegation}})
		ran1 := runOf(lead, "s1")
		<-slowStarted
		ran2 := runOf(lead, "s2")
		<-inHook
		closed := closeOf(context.Background(), lead)
		synctest.Wait() // Close waits, while the hook runs and so does the long handler
		close(hookGo)
		if err := <-closed; err != nil {
			t.Errorf("the host's Close: %v, want nil once both Runs have returned", err)
		}
		for _, ran := range []<-chan error{ran1, ran2} {
			if err := <-ran; err != nil {
				t.Errorf("the lead's Run: %v", err)
			}
		}
	})
}
