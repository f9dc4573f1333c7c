package inspect_test

import (
	"context"
	"testing"

	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestSessions_SlashInAgentName: an agent's name may hold a '/' (and a
// '%'), which agent.SessionKey and the loop's actor name escape. Its
// sessions are listed under the key its store holds them by, named
// after the agent as given, their durability position found, and
// selected by that key; another agent's session of the same id is
// another session.
func TestSessions_SlashInAgentName(t *testing.T) {
	rt, in, store := inspectedStore(t, nil)
	names := []string{"team/a%b", "team"}
	for _, name := range names {
		model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: name + "'s answer"}}}, nil)
		a, err := agent.New(rt, in.Model(model.Spec("model")), &agent.Options{Name: name, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(context.Background()) })
		if _, err := a.Run(testCtx(t), "s1", []models.Message{models.UserMessage("Hi.")}); err != nil {
			t.Fatal(err)
		}
	}
	snap := in.Snapshot("")
	if len(snap.Sessions) != 2 {
		t.Fatalf("listed %q, want one session per agent", listedIDs(in))
	}
	for _, name := range names {
		key := agent.SessionKey(name, "s1")
		var found bool
		for _, s := range snap.Sessions {
			if s.ID == key {
				found = true
				if s.Agent != name || s.Requests == 0 || !s.Answered {
					t.Errorf("%s's session listed as %+v", name, s)
				}
			}
		}
		if !found {
			t.Errorf("%s's session not listed as %q: listed %q", name, key, listedIDs(in))
		}
		d := in.Snapshot(key).Session
		if d == nil || d.Agent != name || d.Session != "s1" || d.Answer != name+"'s answer" {
			t.Fatalf("%s's session selected by %q shows %+v", name, key, d)
		}
		if d.Durability == nil {
			t.Errorf("%s's session shows no durability position, though its agent persisted it", name)
		}
	}
}
