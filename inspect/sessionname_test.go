package inspect_test

import (
	"context"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// An agent's session whose id holds '#' is shown under that id, apart
// from the session whose second attempt's stream has that id: session
// "x#2" with its one request and answer, session "x" with the requests
// of both its attempts.
func TestSessions_AgentSessionWithHash(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{ // in the order the requests come
		{Text: "x#2's answer."}, // session x#2
		{Error: "overloaded"},   // session x, attempt 1
		{Text: "x's answer."},   // session x, attempt 2
	}}, nil)
	a, err := agent.New(rt, in.Model(model.Spec("model")), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	ask := []models.Message{models.UserMessage("Go.")}
	for _, session := range []string{"x#2", "x"} {
		if _, err := a.Run(context.Background(), session, ask); err != nil {
			t.Fatalf("session %s: %v", session, err)
		}
	}

	got := map[string]int{} // requests by session shown
	for _, s := range in.Snapshot("").Sessions {
		got[s.ID] = s.Requests
	}
	if len(got) != 2 || got["x#2"] != 1 || got["x"] != 2 {
		t.Errorf("sessions shown with their requests %v, want x#2: 1 and x: 2", got)
	}
	for session, answer := range map[string]string{"x#2": "x#2's answer.", "x": "x's answer."} {
		d := in.Snapshot(session).Session
		if d == nil {
			t.Errorf("session %q not shown", session)
			continue
		}
		if d.ID != session || d.Answer != answer {
			t.Errorf("session %q shown as %q answering %q, want %q", session, d.ID, d.Answer, answer)
		}
	}
}
