package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestRun_ErrorAlwaysHasAnAnswer: Run and Resume return a non-nil
// Answer (empty when nothing was answered) with every error, as a
// Stream's EventError has one: refused at once (the session id invalid,
// no messages, the session busy, a session not waiting, the agent
// closed or never made) as well as later.
func TestRun_ErrorAlwaysHasAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		gate := make(chan struct{})
		block := tools.MustNew(tools.Definition{Name: "block", Description: "Wait.",
			Handler: func(context.Context, json.RawMessage) (any, error) { <-gate; return nil, nil }})
		a := newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "block", `{}`)}},
			scripted.Turn{Text: "Hi."},
		), &agent.Options{Tools: []*tools.Tool{block}})
		busy := make(chan error, 1)
		go func() { _, err := a.Run(context.Background(), "busy", ask); busy <- err }()
		synctest.Wait() // the busy session's Run waits for its call
		check := func(what string, ans *models.Answer, err error, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", what, err, want)
			}
			if ans == nil {
				t.Errorf("%s: a nil Answer with %v, want an empty one", what, err)
			}
		}
		ans, err := a.Run(context.Background(), "", ask)
		check("Run of an empty session id", ans, err, agent.ErrInvalidSessionID)
		ans, err = a.Run(context.Background(), "s", nil)
		check("Run without messages", ans, err, agent.ErrNoMessages)
		ans, err = a.Run(context.Background(), "busy", ask)
		check("Run of a busy session", ans, err, agent.ErrSessionBusy)
		ans, err = a.Resume(context.Background(), "idle", nil)
		check("Resume of a session not waiting", ans, err, agent.ErrNotWaiting)
		close(gate)
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
		if err := a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		ans, err = a.Run(context.Background(), "s", ask)
		check("Run of a closed agent", ans, err, agent.ErrClosed)
		ans, err = a.Resume(context.Background(), "s", nil)
		check("Resume of a closed agent", ans, err, agent.ErrClosed)
		ans, err = new(agent.Agent).Run(context.Background(), "s", ask)
		check("Run of a zero Agent", ans, err, agent.ErrNoAgent)
	})
}
