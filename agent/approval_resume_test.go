package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// rm is an irreversible tool (idempotent on request) counting its runs.
func rm(runs *atomic.Int64, idempotent bool) *tools.Tool {
	return tools.MustNewTyped(tools.Definition{Name: "rm", Irreversible: true, Idempotent: idempotent},
		func(_ context.Context, in struct {
			Path string `json:"path"`
		}) (map[string]string, error) {
			runs.Add(1)
			return map[string]string{"removed": in.Path}, nil
		})
}

// rmModel calls rm twice (r1, r2) in its first round, then answers.
func rmModel(t *testing.T) *scripted.Model {
	t.Helper()
	return scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "removing", ToolCalls: []scripted.ToolCall{call("r1", "rm", `{"path":"a"}`), call("r2", "rm", `{"path":"b"}`)}},
		{Text: "done"},
	}}, nil)
}

// rmWaiting starts an agent (with store, when not nil) whose session "s"
// waits for approval of r1 and r2.
func rmWaiting(t *testing.T, rt *actors.Runtime, store durability.Store, runs *atomic.Int64) (*agent.Agent, *scripted.Model) {
	t.Helper()
	m := rmModel(t)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Name: "rm", Tools: []*tools.Tool{rm(runs, false)}, Store: store,
		Approval: &tools.ApprovalOptions{}})
	_, err := a.Run(testCtx(t), "s", ask)
	waiting(t, err, "r1", "r2")
	return a, m
}

// forStores runs f without a Store and with one.
func forStores(t *testing.T, f func(t *testing.T, store durability.Store)) {
	t.Run("no store", func(t *testing.T) { f(t, nil) })
	t.Run("memstore", func(t *testing.T) {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
}

// resumeCtx bounds a Resume that must answer at once: one that waits for
// something that never comes ends with it instead of the test's.
func resumeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestApprovalResume_EditNotJSONDenies: an edit whose arguments are not
// JSON denies the call and tells the model why, as any edit that fails
// validation does; Resume does not panic, and the other call still waits.
func TestApprovalResume_EditNotJSONDenies(t *testing.T) {
	forStores(t, func(t *testing.T, store durability.Store) {
		rt := actorstest.NewRuntime(t, nil)
		var runs atomic.Int64
		a, _ := rmWaiting(t, rt, store, &runs)
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Resume panicked: %v", r)
				}
			}()
			_, err = a.Resume(resumeCtx(t), "s", ask, agent.Edit("r1", json.RawMessage("{bad")))
		}()
		waiting(t, err, "r2")
		ans, err := a.Resume(resumeCtx(t), "s", ask, agent.Approve("r2"))
		if err != nil {
			t.Fatal(err)
		}
		r := resultOf(t, ans, "r1")
		if ans.Text != "done" || runs.Load() != 1 || r.FailureKind != string(tools.FailureDenied) || !strings.Contains(string(r.Content), "not JSON") {
			t.Fatalf("answer %q, %d runs, r1's result %+v", ans.Text, runs.Load(), r)
		}
	})
}

// TestApprovalResume_NothingApplied: a Resume that applies no decision
// (none given, or only about calls that do not wait) returns the
// WaitingError at once, the calls still waiting.
func TestApprovalResume_NothingApplied(t *testing.T) {
	for name, decisions := range map[string][]tools.ApprovalAnswer{
		"none":       nil,
		"unknown id": {agent.Approve("nope")},
	} {
		t.Run(name, func(t *testing.T) {
			forStores(t, func(t *testing.T, store durability.Store) {
				rt := actorstest.NewRuntime(t, nil)
				var runs atomic.Int64
				a, _ := rmWaiting(t, rt, store, &runs)
				_, err := a.Resume(resumeCtx(t), "s", ask, decisions...)
				waiting(t, err, "r1", "r2")
				ans, err := a.Resume(resumeCtx(t), "s", ask, agent.Approve("r1"), agent.Approve("r2"))
				if err != nil || ans.Text != "done" || runs.Load() != 2 {
					t.Fatalf("Resume after: %v, %+v, %d runs", err, ans, runs.Load())
				}
			})
		})
	}
}

// TestApprovalResume_InvalidDecisions: decisions that cannot be applied
// (no id, an unknown decision, two different ones for one call) are an
// error of Resume, before anything is sent: the calls still wait.
func TestApprovalResume_InvalidDecisions(t *testing.T) {
	for name, decisions := range map[string][]tools.ApprovalAnswer{
		"empty id":         {agent.Approve("")},
		"unknown decision": {{ToolCallID: "r1", Decision: "maybe"}, agent.Approve("r2")},
		"conflicting":      {agent.Approve("r2"), agent.Deny("r2", "no")},
	} {
		t.Run(name, func(t *testing.T) {
			forStores(t, func(t *testing.T, store durability.Store) {
				rt := actorstest.NewRuntime(t, nil)
				var runs atomic.Int64
				a, _ := rmWaiting(t, rt, store, &runs)
				if _, err := a.Resume(resumeCtx(t), "s", ask, decisions...); !errors.Is(err, agent.ErrInvalidDecision) {
					t.Fatalf("Resume: %v, want ErrInvalidDecision", err)
				}
				if runs.Load() != 0 {
					t.Fatalf("%d runs", runs.Load())
				}
				_, err := a.Resume(resumeCtx(t), "s", ask)
				waiting(t, err, "r1", "r2")
				ans, err := a.Resume(resumeCtx(t), "s", ask, agent.Approve("r1"), agent.Deny("r2", "no"))
				if err != nil || ans.Text != "done" || runs.Load() != 1 {
					t.Fatalf("Resume after: %v, %+v, %d runs", err, ans, runs.Load())
				}
			})
		})
	}
}

// TestApprovalResume_NeverRan: Resume of a session that never ran is
// ErrNotWaiting with a Store too: no conversation starts.
func TestApprovalResume_NeverRan(t *testing.T) {
	forStores(t, func(t *testing.T, store durability.Store) {
		rt := actorstest.NewRuntime(t, nil)
		var runs atomic.Int64
		a, m := rmWaiting(t, rt, store, &runs)
		before := len(m.Requests())
		if _, err := a.Resume(resumeCtx(t), "never-ran", ask, agent.Approve("r1")); !errors.Is(err, agent.ErrNotWaiting) {
			t.Fatalf("Resume: %v, want ErrNotWaiting", err)
		}
		if n := len(m.Requests()); n != before || runs.Load() != 0 {
			t.Fatalf("%d model requests (%d before), %d runs", n, before, runs.Load())
		}
	})
}

// TestApprovalResume_HeldWithoutGate: a session stored while calls waited
// for approval, resumed by an agent without an approval policy, never
// runs them (not even an idempotent tool's) and does not call them
// interrupted: each is answered as not run because it waited for
// approval, and the model goes on.
func TestApprovalResume_HeldWithoutGate(t *testing.T) {
	for name, idempotent := range map[string]bool{"irreversible": false, "idempotent": true} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ap.db")
			var runs atomic.Int64
			func() { // the first process: the calls wait, then it stops
				store, err := boltstore.Open(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				rt := actorstest.NewRuntime(t, nil)
				a, err := agent.New(rt, rmModel(t).Spec("model"), &agent.Options{Name: "rm", Tools: []*tools.Tool{rm(&runs, idempotent)},
					Store: store, Approval: &tools.ApprovalOptions{}})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close(context.Background())
				_, err = a.Run(testCtx(t), "s", ask)
				waiting(t, err, "r1", "r2")
			}()
			store, err := boltstore.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			rt := actorstest.NewRuntime(t, nil)
			a := newAgent(t, rt, rmModel(t).Spec("model"), &agent.Options{Name: "rm", Tools: []*tools.Tool{rm(&runs, idempotent)}, Store: store})
			ans, err := a.Run(testCtx(t), "s", ask)
			if err != nil {
				t.Fatal(err)
			}
			if ans.Text != "done" || runs.Load() != 0 {
				t.Fatalf("answer %q, %d runs", ans.Text, runs.Load())
			}
			for _, id := range []string{"r1", "r2"} {
				r := resultOf(t, ans, id)
				if !r.IsError || r.FailureKind == string(tools.FailureInterrupted) || !strings.Contains(string(r.Content), "waiting for approval") ||
					!strings.Contains(string(r.Content), "not run") {
					t.Fatalf("%s: %s (%s)", id, r.Content, r.FailureKind)
				}
			}
			if held, err := tools.ReadApprovals(store, a.SessionKey("s")); err != nil || len(held) != 0 {
				t.Fatalf("still held: %+v, %v", held, err)
			}
		})
	}
}
