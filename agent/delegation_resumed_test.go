// A delegation that waited for approval and was then resumed by the
// same Agent leaves no session in the Store once answered, as one that
// did not wait.
package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

func TestAsTool_ResumedDelegationSessionDeleted(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	writer := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Name: "writer", Store: store,
		Tools: []*tools.Tool{echo(nil), l.tool()}, Approval: &tools.ApprovalOptions{}})
	var session string
	var last agent.Event
	lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(s string, ev agent.Event) {
		session, last = s, ev
	}})
	res := onlyResult(t, runLead(t, lead, "team", "Write it."))
	t.Logf("delegation result: %s; last event %v %q", res.Content, last.Kind, last.Text)
	if session == "" {
		t.Fatal("no delegation session seen")
	}
	if _, ok, err := tools.ReadSession(context.Background(), store, writer.SessionKey(session)); err != nil || !ok {
		t.Fatalf("the waiting delegation's session is not kept (%v, %v)", ok, err)
	}
	ans, err := writer.Resume(testCtx(t), session, []models.Message{models.UserMessage("echo hi")}, agent.Approve("c2"))
	if err != nil {
		var w *agent.WaitingError
		t.Fatalf("Resume: %v (waiting %v)", err, errors.As(err, &w))
	}
	t.Logf("resumed: %q", ans.Text)
	// The writer's loop for the session stops once idle; Close waits for everything.
	if err := writer.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tools.ReadSession(context.Background(), store, writer.SessionKey(session)); err != nil || ok {
		t.Errorf("delegation %q was resumed and answered, yet its session stays in the store for good (%v, %v)", session, ok, err)
	}
}

// TestAsTool_DelegationWaitingWithoutStore: a delegation to an agent
// without a Store whose policy holds a call cannot wait: its held call
// dies with the delegation's loop. The lead's call fails with an error
// result naming the held call, the held call never runs, the writer
// lists no session waiting, and a Resume of the delegation's session
// finds none (ErrNotWaiting).
func TestAsTool_DelegationWaitingWithoutStore(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	writer := newAgent(t, rt, approvalScript(t).Spec("model"), &agent.Options{Name: "writer",
		Tools: []*tools.Tool{echo(nil), l.tool()}, Approval: &tools.ApprovalOptions{}})
	var session string
	lead := delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(s string, _ agent.Event) { session = s }})
	ans := runLead(t, lead, "team", "Write it.")
	if res := onlyResult(t, ans); !res.IsError || !strings.Contains(string(res.Content), "waits for approval of launch c2") {
		t.Fatalf("the delegation's result: %s (error %v), want an error naming the held call", res.Content, res.IsError)
	}
	if got := writer.Waiting(); len(got) != 0 {
		t.Errorf("the writer lists %v waiting, want none: a delegation's held calls die with it", got)
	}
	if _, err := writer.Resume(testCtx(t), session, nil, agent.Approve("c2")); !errors.Is(err, agent.ErrNotWaiting) {
		t.Errorf("Resume of the delegation %q: %v, want ErrNotWaiting", session, err)
	}
	if n := l.runs.Load(); n != 0 {
		t.Errorf("%d launches, want none", n)
	}
}
