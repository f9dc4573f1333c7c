package inspect_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

var restoreAsk = []models.Message{models.UserMessage("echo seven")}

// durableEcho is an agent whose echo calls wait for a person, its
// sessions kept in store; with in, the inspector sees it all.
func durableEcho(t *testing.T, rt *actors.Runtime, store durability.Store, in *inspect.Inspector) (*agent.Agent, *int) {
	t.Helper()
	ran := new(int)
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Description: "echoes x"},
		func(_ context.Context, in echoIn) (echoOut, error) { *ran++; return echoOut(in), nil })
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Let me echo.", ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "echo", Arguments: `{"x":7}`}}},
		{Text: "done"},
	}}, nil).Spec("model")
	opts := &agent.Options{Name: "durable", Tools: []*tools.Tool{echo}, Store: store,
		Approval: &tools.ApprovalOptions{Policy: askEcho}}
	if in != nil {
		model = in.Model(model)
		opts.Approval = in.Approval(opts.Approval)
		opts.OnToolResult = in.OnToolResult
		opts.Store = in.Store(store)
	}
	a, err := agent.New(rt, model, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, ran
}

// A host restarting with its durable store shows the calls its sessions
// held for approval before the restart, and follows them: listed until
// answered, and answerable.
func TestRestoreApprovals_HeldBeforeRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")

	// The first process: the call waits, the process stops.
	func() {
		store, err := boltstore.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		rt, err := actors.NewRuntime(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close(context.Background())
		a, _ := durableEcho(t, rt, store, nil)
		defer a.Close(context.Background())
		var w *agent.WaitingError
		if _, err := a.Run(testCtx(t), "s1", restoreAsk); !errors.As(err, &w) || len(w.Pending) != 1 || w.Pending[0].ToolCallID != "call_1" {
			t.Fatalf("first process: %v, want call_1 waiting", err)
		}
	}()

	// The second process, on the same store, with the inspector.
	store, err := boltstore.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	a, ran := durableEcho(t, rt, store, in)
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	r := &rig{rt: rt, in: in, srv: srv}

	if snap := r.state(t, "s1"); snap.Session != nil && len(snap.Session.Approvals) != 0 {
		t.Fatalf("listed before the restore: %+v", snap.Session.Approvals)
	}
	if err := in.RestoreAgentApprovals(store, "durable", "s1", "never-held"); err != nil {
		t.Fatal(err)
	}
	snap := r.state(t, "s1")
	if len(snap.Sessions) != 1 || snap.Sessions[0].ID != "s1" || snap.Sessions[0].Approvals != 1 {
		t.Fatalf("sessions %+v, want s1 with one call waiting (and nothing for a session that holds none)", snap.Sessions)
	}
	w := snap.Session.Approvals[0]
	if w.ID != "call_1" || w.Tool != "echo" || w.Stream != "s1" || w.Args != `{"x":7}` || w.Reason != "echo needs a person" || !w.Restored {
		t.Fatalf("waiting call %+v, want call_1 of echo restored from the store", w)
	}
	if !feedHas(snap, "approval", "echo call call_1 on s1 waits for approval (held before a restart, read from the store)") {
		t.Fatalf("feed %+v, want the restored call", snap.Feed)
	}
	if _, page := r.get(t, "/?session=s1"); !strings.Contains(page, `data-approval="call_1"`) || !strings.Contains(page, "1 awaiting approval") {
		t.Fatalf("page without the restored call:\n%s", page)
	}

	// Run without an answer: held again, still listed once.
	var werr *agent.WaitingError
	if _, err := a.Run(testCtx(t), "s1", restoreAsk); !errors.As(err, &werr) {
		t.Fatalf("run again: %v, want it waiting", err)
	}
	if snap = r.state(t, "s1"); len(snap.Session.Approvals) != 1 {
		t.Fatalf("after the session held it again: %+v", snap.Session.Approvals)
	}

	// Answered in this process: it runs, and is gone from the list.
	ans, err := a.Resume(testCtx(t), "s1", restoreAsk, agent.Approve("call_1"))
	if err != nil || ans.Text != "done" || *ran != 1 {
		t.Fatalf("resume: %v, answer %+v, ran %d times", err, ans, *ran)
	}
	snap = r.state(t, "s1")
	if snap.Sessions[0].Approvals != 0 || len(snap.Session.Approvals) != 0 {
		t.Fatalf("still waiting after the approval: %+v", snap.Session.Approvals)
	}
	if !feedHas(snap, "approval", "echo call call_1 on s1 was approved and ran") {
		t.Fatalf("feed %+v, want the approval", snap.Feed)
	}
	if echo := tool(snap, "echo"); echo.Calls != 1 || echo.Failures != 0 {
		t.Fatalf("echo figures %+v, want the approved call", echo)
	}
}

// Reading a store that fails is an error naming the session.
func TestRestoreApprovals_StoreError(t *testing.T) {
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := in.RestoreApprovals(store, "s1"); err == nil || !strings.Contains(err.Error(), `session "s1"`) || !errors.Is(err, durability.ErrClosed) {
		t.Fatalf("restore from a closed store: %v", err)
	}
}
