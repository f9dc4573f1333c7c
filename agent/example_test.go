package agent_test

import (
	"context"
	"fmt"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

func add(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil }

// An agent with one typed tool, answering a conversation with Run. The
// model is scripted here; models/openai speaks to a real one.
func Example() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	model := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Let me add them.", ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":2,"b":3}`}}},
		{Text: "2 + 3 = 5."},
	}}, nil)
	a, err := agent.New(rt, model.Spec("model"), &agent.Options{
		Tools:        []*tools.Tool{tools.MustNewTyped(tools.Definition{Name: "add", Description: "Add two integers."}, add)},
		SystemPrompt: "You are a calculator.",
	})
	if err != nil {
		panic(err)
	}
	defer a.Close(context.Background())
	ans, err := a.Run(context.Background(), "session-1", []models.Message{models.UserMessage("What is 2 + 3?")})
	if err != nil {
		panic(err)
	}
	for _, r := range ans.Rounds {
		fmt.Printf("said %q and called %s(%s) = %s\n", r.Text, r.Calls[0].Name, r.Calls[0].Arguments, r.Results[0].Content)
	}
	fmt.Println("answer:", ans.Text)
	// Output:
	// said "Let me add them." and called add({"a":2,"b":3}) = 5
	// answer: 2 + 3 = 5.
}

// A lead agent that delegates to a specialist given to it as a tool.
func ExampleAsTool() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	specialist, err := agent.New(rt, scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "A haiku about actors: mailboxes fill, one message at a time, no locks held."},
	}}, nil).Spec("model"), &agent.Options{Name: "poet"})
	if err != nil {
		panic(err)
	}
	defer specialist.Close(context.Background())
	poet, err := agent.AsTool(specialist, &agent.ToolOptions{Description: "Writes poems."})
	if err != nil {
		panic(err)
	}
	lead, err := agent.New(rt, scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "d1", Name: "poet", Arguments: `{"task":"A haiku about actors."}`}}},
		{Text: "The poet delivered."},
	}}, nil).Spec("model"), &agent.Options{Name: "lead", Tools: []*tools.Tool{poet}})
	if err != nil {
		panic(err)
	}
	defer lead.Close(context.Background())
	ans, err := lead.Run(context.Background(), "team-1", []models.Message{models.UserMessage("Get me a haiku.")})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(ans.Rounds[0].Results[0].Content))
	fmt.Println(ans.Text)
	// Output:
	// {"success":true,"answer":"A haiku about actors: mailboxes fill, one message at a time, no locks held.","tool_calls":0}
	// The poet delivered.
}
