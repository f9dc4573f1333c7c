package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/models/streaming"
	"github.com/polyweave/polyweave-go/tools"
)

// restarts runs the stream of a conversation and returns its restarts
// and its error.
func restarts(seq func(func(agent.Event, error) bool)) (n int, err error) {
	for ev, e := range seq {
		if ev.Kind == agent.EventRestart {
			n++
		}
		err = e
	}
	return n, err
}

// TestRun_SessionConflictIsNotRetried: with a Store, a Run of a session
// started with other messages fails at once with ErrSessionConflict: no
// attempt is made again.
func TestRun_SessionConflictIsNotRetried(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hi."}), &agent.Options{Store: store})
	if _, err := a.Run(testCtx(t), "s", ask); err != nil {
		t.Fatal(err)
	}
	other := []models.Message{models.UserMessage("Something else.")}
	n, err := restarts(a.Stream(testCtx(t), "s", other))
	if !errors.Is(err, agent.ErrSessionConflict) || n != 0 {
		t.Fatalf("other messages: %v after %d restarts, want ErrSessionConflict at once", err, n)
	}
}

// TestRun_InvalidSessionIDs: an empty id, one that is not UTF-8 and one
// longer than MaxSessionIDBytes are refused before anything is sent, with
// an error that says why and does not repeat a long id whole; an id of
// MaxSessionIDBytes is taken by an agent without a Store.
func TestRun_InvalidSessionIDs(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	m := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Hi."}}}, nil)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Store: openBolt(t)})
	for id, why := range map[string]string{"": "empty", "bad\xff": "not valid UTF-8",
		strings.Repeat("x", 40000): "more than 1024"} {
		_, err := a.Run(testCtx(t), id, ask)
		if !errors.Is(err, agent.ErrInvalidSessionID) || !strings.Contains(err.Error(), why) || len(err.Error()) > 200 {
			t.Errorf("id of %d bytes: %v, want ErrInvalidSessionID saying %q, short", len(id), err, why)
		}
		if err := a.Discard(testCtx(t), id); !errors.Is(err, agent.ErrInvalidSessionID) {
			t.Errorf("Discard of an id of %d bytes: %v, want ErrInvalidSessionID", len(id), err)
		}
	}
	// Without a Store, an id of MaxSessionIDBytes is taken (with one, its
	// key must fit every store: TestStore_SessionKeysFitEveryStore).
	plain := newAgent(t, rt, m.Spec("model"), nil)
	if ok := strings.Repeat("é", agent.MaxSessionIDBytes/2); len(ok) == agent.MaxSessionIDBytes {
		if _, err := plain.Run(testCtx(t), ok, ask); err != nil {
			t.Errorf("an id of MaxSessionIDBytes: %v", err)
		}
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("the model got %d requests, want only the valid id's", n)
	}
}

// TestRun_PermanentModelFailureIsNotRetried: a model failure the adapter
// marks permanent ends the Run after one attempt with a FailedError whose
// cause is ErrPermanent; one that is not is tried MaxAttempts times.
func TestRun_PermanentModelFailureIsNotRetried(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	for _, tc := range []struct {
		err      error
		attempts int64
	}{
		{models.Permanent(errors.New("HTTP 401: invalid key")), 1},
		{errors.New("HTTP 503: try later"), agent.DefaultMaxAttempts},
	} {
		var asked atomic.Int64
		failing := streaming.Spec("model", func(context.Context, *models.Request, func(*messages.Frame)) ([]*messages.Frame, error) {
			asked.Add(1)
			return nil, tc.err
		})
		a := newAgent(t, rt, failing, nil)
		_, err := a.Run(testCtx(t), "s", ask)
		var failed *agent.FailedError
		if !errors.As(err, &failed) || failed.Attempts != int(tc.attempts) || asked.Load() != tc.attempts ||
			errors.Is(err, agent.ErrPermanent) != models.IsPermanent(tc.err) {
			t.Errorf("%v: %v, model asked %d times, want %d attempts", tc.err, err, asked.Load(), tc.attempts)
		}
	}
}

// TestRun_NoMessages: a Run or Stream with no message fails with
// ErrNoMessages, and nothing reaches the model.
func TestRun_NoMessages(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	m := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Hi."}}}, nil)
	a := newAgent(t, rt, m.Spec("model"), nil)
	if _, err := a.Run(testCtx(t), "s", nil); !errors.Is(err, agent.ErrNoMessages) {
		t.Errorf("Run: %v, want ErrNoMessages", err)
	}
	if _, err := restarts(a.Stream(testCtx(t), "s", []models.Message{})); !errors.Is(err, agent.ErrNoMessages) {
		t.Errorf("Stream: %v, want ErrNoMessages", err)
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("the model got %d requests, want none", n)
	}
}

// TestRun_ErrorsNameTheAgent: every error a Run, a Resume or a Discard
// returns about a session says which agent and session it concerns, as
// ErrSessionBusy does, and errors.Is and errors.As still tell what it is:
// no final answer within the iteration limit, every attempt failed, a
// session waiting for approval (and a Run of it), a session that does
// not wait.
func TestRun_ErrorsNameTheAgent(t *testing.T) {
	named := func(t *testing.T, err error) {
		t.Helper()
		if msg := err.Error(); !strings.Contains(msg, `agent "bot"`) || !strings.Contains(msg, `session "s1"`) {
			t.Errorf("error %q does not say which agent and session it concerns", msg)
		}
	}
	for _, tc := range []struct {
		name string
		turn scripted.Turn
		is   func(error) bool
	}{
		{"no answer within the iteration limit", scripted.Turn{ToolCalls: []scripted.ToolCall{call("c", "echo", `{"text":"hi"}`)}},
			func(err error) bool { return errors.Is(err, agent.ErrNoAnswer) }},
		{"every attempt failed", scripted.Turn{Error: "overloaded"},
			func(err error) bool { var f *agent.FailedError; return errors.As(err, &f) && f.Agent == "bot" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			m := scripted.MustNew(scripted.Script{Repeat: true, Turns: []scripted.Turn{tc.turn}}, nil)
			a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "bot", Tools: []*tools.Tool{echo(nil)}, MaxIterations: 2})
			_, err := a.Run(testCtx(t), "s1", ask)
			if !tc.is(err) {
				t.Fatalf("Run: %v, not the error expected", err)
			}
			named(t, err)
		})
	}
	t.Run("approval", func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Name: "bot",
			Tools: []*tools.Tool{echo(nil), newLauncher().tool()}, Approval: &tools.ApprovalOptions{}})
		if _, err := a.Resume(testCtx(t), "s1", ask, agent.Approve("c2")); !errors.Is(err, agent.ErrNotWaiting) {
			t.Fatalf("Resume of a session not waiting: %v", err)
		} else {
			named(t, err)
		}
		if err := a.Discard(testCtx(t), "s1"); !errors.Is(err, agent.ErrNotWaiting) {
			t.Fatalf("Discard of a session not waiting: %v", err)
		} else {
			named(t, err)
		}
		_, err := a.Run(testCtx(t), "s1", ask)
		var w *agent.WaitingError
		if !errors.As(err, &w) || w.Agent != "bot" {
			t.Fatalf("Run: %v, want a *WaitingError of agent bot", err)
		}
		named(t, err)
		if _, err := a.Run(testCtx(t), "s1", ask); !errors.Is(err, agent.ErrWaiting) {
			t.Fatalf("Run of a waiting session: %v", err)
		} else {
			named(t, err)
		}
	})
}
