package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestAsTool_DurableSubAgentAfterRestart: a sub-agent with a Store keeps
// its delegated conversations there. After the host starts again (a new
// Agent of the same name on the same store, as a new process would
// make), a delegation of another task must get a conversation of its
// own, not the one the first process stored under the same session id
// (which was refused as a conflict, failing the call) nor its answer.
func TestAsTool_DurableSubAgentAfterRestart(t *testing.T) {
	store := memstore.New(nil)
	defer store.Close()
	delegate := func(task string) string {
		rt := actorstest.NewRuntime(t, nil)
		writer, err := agent.New(rt, model(t, scripted.Turn{Text: "Done: " + task}),
			&agent.Options{Name: "writer", Store: store})
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Close(testCtx(t))
		tool, err := agent.AsTool(writer, nil)
		if err != nil {
			t.Fatal(err)
		}
		lead, err := agent.New(rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("d1", "writer", fmt.Sprintf(`{"task":%q}`, task))}},
			scripted.Turn{Text: "The team is done."},
		), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}})
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Close(testCtx(t))
		ans, err := lead.Run(testCtx(t), "team", []models.Message{models.UserMessage("Delegate " + task + ".")})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Success bool   `json:"success"`
			Answer  string `json:"answer"`
		}
		if err := json.Unmarshal(onlyResult(t, ans).Content, &got); err != nil || !got.Success {
			t.Fatalf("delegating %q: result %s (%v)", task, onlyResult(t, ans).Content, err)
		}
		return got.Answer
	}
	if got := delegate("first task"); got != "Done: first task" {
		t.Fatalf("first process: %q", got)
	}
	if got := delegate("second task"); got != "Done: second task" {
		t.Fatalf("second process: the writer answered %q", got)
	}
}

// TestAsTool_DelegationSessionsDeletedFromStore: a durable sub-agent
// given as a tool keeps each delegation's session in its Store while the
// delegation runs, under a name with a random per-New tag and a counter
// that no later Run, Resume or process can name again. Once the
// delegation has returned and its loop has stopped, the session is
// deleted: a long-running host that delegates does not grow its store by
// one dead session per delegation.
func TestAsTool_DelegationSessionsDeletedFromStore(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	writer := newAgent(t, rt, model(t, scripted.Turn{Text: "written"}), &agent.Options{Name: "writer", Store: store})
	var sessions []string
	lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(session string, ev agent.Event) {
		if ev.Kind == agent.EventDone {
			sessions = append(sessions, session)
		}
	}})
	for _, s := range []string{"team-1", "team-2", "team-3"} {
		if res := onlyResult(t, runLead(t, lead, s, "Write it.")); res.IsError {
			t.Fatalf("delegation of %s failed: %s", s, res.Content)
		}
	}
	if len(sessions) != 3 {
		t.Fatalf("%d delegations answered, want 3", len(sessions))
	}
	for _, s := range sessions {
		if _, ok, err := tools.ReadSession(context.Background(), store, writer.SessionKey(s)); err != nil || ok {
			t.Errorf("delegation %q answered and returned, yet its session is still in the store (%v, %v)", s, ok, err)
		}
	}
}

// TestAsTool_DelegationSessionsApartFromHostSessions: delegations of an
// agent without a Store take session ids of their own, apart from those
// a host gives the agent's Runs ("one agent serves any number of
// sessions"). Before, they were "<tool>-<n>": a host running the writer
// on its own session "writer-1" made the lead's first delegation fail
// with "session busy".
func TestAsTool_DelegationSessionsApartFromHostSessions(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	var calls atomic.Int64
	// The first call (the host's) blocks until cancelled; later ones
	// (the delegation's) answer at once.
	wait := tools.MustNew(tools.Definition{Name: "wait", Timeout: tools.NoTimeout,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if calls.Add(1) > 1 {
				return "ok", nil
			}
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, ctx.Err()
		}})
	writer := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "wait", `{}`)}},
		scripted.Turn{Text: "written"},
	), &agent.Options{Name: "writer", Tools: []*tools.Tool{wait}})

	// The host's own conversation with the writer, on its session "writer-1".
	hostCtx, cancelHost := context.WithCancel(testCtx(t))
	hostDone := make(chan error, 1)
	go func() {
		_, err := writer.Run(hostCtx, "writer-1", []models.Message{models.UserMessage("host's own task")})
		hostDone <- err
	}()
	<-started // the host's conversation runs, its tool blocked

	res := onlyResult(t, runLead(t, delegatingLead(t, rt, writer, nil), "team", "Delegate."))
	cancelHost()
	if err := <-hostDone; !errors.Is(err, context.Canceled) {
		t.Errorf("host's run: %v", err)
	}
	<-cancelled
	if res.IsError {
		t.Fatalf("the delegation failed while the host uses session %q of the writer: %s", "writer-1", res.Content)
	}
}
