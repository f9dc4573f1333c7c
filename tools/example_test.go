package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// A tool loop around a (scripted) model: the consumer sees the model's
// text, each tool call and its result, the final answer, then END.
func ExampleNewLoop() {
	type in struct {
		Name string `json:"name"`
	}
	greetTool := tools.MustNewTyped(tools.Definition{Name: "greet", Description: "Greets someone"},
		func(ctx context.Context, in in) (string, error) { return "Hello, " + in.Name, nil })

	model := tooltest.ScriptedModel("model", [][]*messages.Frame{
		{messages.ToolCall("", "call_1", "greet", json.RawMessage(`{"name":"Ada"}`)), messages.End("")},
		{messages.Text("", "The tool says hello to Ada."), messages.End("")},
	}, nil)
	loop, err := tools.NewLoop(model, &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{greetTool}},
		SystemPrompt:  "Use tools when they help.",
	})
	if err != nil {
		panic(err)
	}

	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer rt.Close(ctx)
	conn, err := rt.Start(loop)
	if err != nil {
		panic(err)
	}
	_ = conn.SendAll(
		messages.RawParam("s1", "messages", json.RawMessage(`[{"role":"user","content":"Greet Ada"}]`)),
		messages.End("s1"))
	frames, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		panic(err)
	}
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TOOL_CALL:
			fmt.Printf("call %s %s(%s)\n", f.GetToolCallId(), f.GetName(), f.GetPayload())
		case messages.FrameType_TOOL_RESULT:
			fmt.Printf("result %s %s\n", f.GetToolCallId(), f.GetPayload())
		case messages.FrameType_TEXT:
			fmt.Println("text", f.GetText())
		default:
			fmt.Println(f.GetType())
		}
	}
	// Output:
	// call call_1 greet({"name":"Ada"})
	// result call_1 "Hello, Ada"
	// text The tool says hello to Ada.
	// END
}

// The README's example: a typed Go function as a tool, in a tool loop
// around the scripted model adapter.
func Example_typedToolLoop() {
	type greetIn struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	greet := tools.MustNewTyped(tools.Definition{Name: "greet", Description: "Greets someone"},
		func(ctx context.Context, in greetIn) (string, error) { return "Hello, " + in.Name, nil })

	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "greet", Arguments: `{"name":"Ada"}`}}},
		{Text: "The tool says hello to Ada."},
	}}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Tools: []*tools.Tool{greet}},
	})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	conn, err := rt.Start(loop)
	if err != nil {
		panic(err)
	}
	_ = conn.SendAll(messages.RawParam("s1", "messages", json.RawMessage(`[{"role":"user","content":"Greet Ada"}]`)),
		messages.End("s1"))
	frames, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		panic(err)
	}
	for _, f := range frames {
		if f.GetType() != messages.FrameType_META {
			fmt.Println(messages.Format(f))
		}
	}
	// Output:
	// TOOL_CALL stream=s1 id=call_1 name=greet payload={"name":"Ada"}
	// TOOL_RESULT stream=s1 id=call_1 name=greet payload="Hello, Ada"
	// TEXT stream=s1 text="The tool says hello to Ada."
	// END stream=s1
}
