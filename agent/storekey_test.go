package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// answering is a durable agent named name on store whose model calls
// echo once and then answers text.
func answering(t *testing.T, rt *actors.Runtime, store durability.Store, name, text string) *agent.Agent {
	t.Helper()
	return newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: text},
	), &agent.Options{Name: name, Tools: []*tools.Tool{echo(nil)}, Store: store})
}

func openBolt(t *testing.T) durability.Store {
	t.Helper()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "sessions.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// TestStore_AgentsKeepTheirOwnSessionsConcurrently: two agents of
// different names on one store run a session of the same id at once;
// each answers its own, and running it again gives each its own answer
// from the store.
func TestStore_AgentsKeepTheirOwnSessionsConcurrently(t *testing.T) {
	store := openBolt(t)
	rt := actorstest.NewRuntime(t, nil)
	one := answering(t, rt, store, "one", "answer one")
	two := answering(t, rt, store, "two", "answer two")
	for round := range 2 { // the second round answers from the store
		var wg sync.WaitGroup
		got := make([]string, 2)
		errs := make([]error, 2)
		for i, a := range []*agent.Agent{one, two} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ans, err := a.Run(testCtx(t), "shared-id", ask)
				errs[i] = err
				if ans != nil {
					got[i] = ans.Text
				}
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || got[0] != "answer one" || got[1] != "answer two" {
			t.Fatalf("round %d: answers %q, errors %v", round, got, errs)
		}
	}
}

// TestStore_AgentsKeepTheirOwnSessionsInTurn: a session one agent ended
// is not another's: the second agent, running the same id and messages
// afterwards, asks its own model.
func TestStore_AgentsKeepTheirOwnSessionsInTurn(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	one := answering(t, rt, store, "one", "answer one")
	two := answering(t, rt, store, "two", "answer two")
	if ans, err := one.Run(testCtx(t), "seq", ask); err != nil || ans.Text != "answer one" {
		t.Fatalf("first agent: %v, %+v", err, ans)
	}
	if ans, err := two.Run(testCtx(t), "seq", ask); err != nil || ans.Text != "answer two" {
		t.Fatalf("second agent: %v, %+v, want its own answer", err, ans)
	}
	if st, ok, err := tools.ReadSession(context.Background(), store, agent.SessionKey("two", "seq")); err != nil || !ok || st.GetText() != "answer two" {
		t.Fatalf("the second agent's session under SessionKey: %v, %v, %v", st, ok, err)
	}
	if key := two.SessionKey("seq"); key != agent.SessionKey("two", "seq") {
		t.Fatalf("Agent.SessionKey %q, want the package's", key)
	}
}

// TestStore_SecondAgentOfOneNameRefused: while an agent uses a store, a
// second one of the same name (the default one included) on that store
// is refused at New; once the first is closed, it is accepted, and it
// resumes the first one's sessions (a host restarting).
func TestStore_SecondAgentOfOneNameRefused(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	first, err := agent.New(rt, model(t, scripted.Turn{Text: "first"}), &agent.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Run(testCtx(t), "s1", ask); err != nil {
		t.Fatal(err)
	}
	_, err = agent.New(rt, model(t, scripted.Turn{Text: "second"}), &agent.Options{Store: store})
	if !errors.Is(err, agent.ErrNameTaken) {
		t.Fatalf("second default agent on the store: %v, want ErrNameTaken", err)
	}
	other := newAgent(t, rt, model(t, scripted.Turn{Text: "other"}), &agent.Options{Name: "other", Store: store})
	if ans, err := other.Run(testCtx(t), "s1", ask); err != nil || ans.Text != "other" {
		t.Fatalf("agent of another name: %v, %+v", err, ans)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := newAgent(t, rt, model(t, scripted.Turn{Text: "second"}), &agent.Options{Store: store})
	if ans, err := again.Run(testCtx(t), "s1", ask); err != nil || ans.Text != "first" {
		t.Fatalf("the same name after Close: %v, %+v, want the stored answer", err, ans)
	}
}

// TestStore_SessionIDOfARecordKeyRefused: the held calls of session "x"
// are stored under its key + tools.ApprovalStoreSuffix, which is the key
// of a session "x/approvals" of the same agent. Such an id is refused
// (ErrInvalidSessionID, saying why) before anything is read or written:
// run, it read x's held calls as its own session, and its writes would
// compact them away. x's held calls stay as they were.
func TestStore_SessionIDOfARecordKeyRefused(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	a := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()}, Store: store,
		Approval: &tools.ApprovalOptions{}})
	_, err := a.Run(testCtx(t), "x", ask)
	waiting(t, err, "c2")
	for _, id := range []string{"x" + tools.ApprovalStoreSuffix, tools.ApprovalStoreSuffix} {
		_, err = a.Run(testCtx(t), id, ask)
		if !errors.Is(err, agent.ErrInvalidSessionID) || !strings.Contains(err.Error(), tools.ApprovalStoreSuffix) {
			t.Fatalf("Run of session %q: %v, want ErrInvalidSessionID naming %q", id, err, tools.ApprovalStoreSuffix)
		}
	}
	if err := a.MigrateSessions(testCtx(t), "x"+tools.ApprovalStoreSuffix); !errors.Is(err, agent.ErrInvalidSessionID) {
		t.Fatalf("MigrateSessions of x/approvals: %v, want ErrInvalidSessionID", err)
	}
	if held, err := tools.ReadApprovals(store, a.SessionKey("x")); err != nil || len(held) != 1 || held[0].ToolCallID != "c2" {
		t.Fatalf("x's held calls: %+v, %v", held, err)
	}
	ans, err := a.Resume(testCtx(t), "x", ask, agent.Approve("c2"))
	if err != nil || ans.Text != "Done." || l.runs.Load() != 1 {
		t.Fatalf("Resume of x: %v, %+v, launched %d", err, ans, l.runs.Load())
	}
}

// wrappedStore is a host's wrapper of a store (one per agent, say, to
// measure each agent's calls) that says what it wraps.
type wrappedStore struct{ durability.Store }

func (w *wrappedStore) Unwrap() durability.Store { return w.Store }

// TestStore_NameTakenThroughWrappers: two agents of one name, each on a
// wrapper of its own around one store (a wrapper saying what it wraps
// with Unwrap), would read and write each other's sessions: the second
// is refused with ErrNameTaken, as on the store itself, and accepted
// once the first is closed.
func TestStore_NameTakenThroughWrappers(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	first, err := agent.New(rt, model(t, scripted.Turn{Text: "first"}), &agent.Options{Store: &wrappedStore{store}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []durability.Store{&wrappedStore{store}, &wrappedStore{&wrappedStore{store}}, store} {
		if a, err := agent.New(rt, model(t, scripted.Turn{Text: "second"}), &agent.Options{Store: s}); !errors.Is(err, agent.ErrNameTaken) {
			t.Errorf("second agent of the name on %T wrapping the first's store: %v, want ErrNameTaken", s, err)
			if err == nil {
				a.Close(context.Background())
			}
		}
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	newAgent(t, rt, model(t, scripted.Turn{Text: "second"}), &agent.Options{Store: &wrappedStore{store}})
}
