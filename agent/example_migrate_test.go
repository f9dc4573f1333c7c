package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// Upgrading a host whose store holds sessions of a version before
// SessionKey, which kept each under its bare id: a Run of one fails with
// ErrLegacySession, and MigrateSessions moves it to the agent's key.
func ExampleAgent_MigrateSessions() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	store := memstore.New(nil)
	defer store.Close()
	ctx := context.Background()
	ask := []models.Message{models.UserMessage("Hello?")}
	a, err := agent.New(rt, scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Hello from before the upgrade."}}}, nil).Spec("model"),
		&agent.Options{Store: store})
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx)
	if _, err := a.Run(ctx, "session-1", ask); err != nil {
		panic(err)
	}
	// Put the session where a version before SessionKey kept it.
	if _, err := tools.MoveSession(ctx, store, a.SessionKey("session-1"), "session-1"); err != nil {
		panic(err)
	}

	_, err = a.Run(ctx, "session-1", ask)
	fmt.Println(errors.Is(err, agent.ErrLegacySession))
	if err := a.MigrateSessions(ctx, "session-1"); err != nil {
		panic(err)
	}
	ans, err := a.Run(ctx, "session-1", ask) // answered from the store
	if err != nil {
		panic(err)
	}
	fmt.Println(ans.Text)
	// Output:
	// true
	// Hello from before the upgrade.
}
