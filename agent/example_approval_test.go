package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/approval"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

type deployIn struct {
	Env string `json:"env"`
}

// An irreversible tool waits for a person: Run returns a *WaitingError
// listing the held call, and Resume gives the decision. With a Store the
// decision may come from another process, days later.
func ExampleAgent_Resume() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "deploy", Arguments: `{"env":"prod"}`}}},
		{Text: "Deployed to staging instead."},
	}}, nil)
	deploy := tools.MustNewTyped(tools.Definition{Name: "deploy", Description: "Deploy the service.", Irreversible: true},
		func(_ context.Context, in deployIn) (string, error) { return "deployed to " + in.Env, nil })
	a, err := agent.New(rt, model.Spec("model"), &agent.Options{
		Tools:    []*tools.Tool{deploy},
		Approval: &tools.ApprovalOptions{Policy: approval.Default()}, // irreversible calls ask
	})
	if err != nil {
		panic(err)
	}
	defer a.Close(context.Background())
	ctx, msgs := context.Background(), []models.Message{models.UserMessage("Deploy it.")}

	_, err = a.Run(ctx, "session-1", msgs)
	var waiting *agent.WaitingError
	if !errors.As(err, &waiting) {
		panic(err)
	}
	p := waiting.Pending[0]
	fmt.Printf("waiting: %s %s (%s)\n", p.Tool, p.Arguments, p.Reason)

	ans, err := a.Resume(ctx, "session-1", msgs, agent.Edit(p.ToolCallID, []byte(`{"env":"staging"}`)))
	if err != nil {
		panic(err)
	}
	fmt.Println("result:", string(ans.Rounds[0].Results[0].Content))
	fmt.Println("answer:", ans.Text)
	// Output:
	// waiting: deploy {"env":"prod"} (deploy is irreversible)
	// result: "deployed to staging"
	// answer: Deployed to staging instead.
}
