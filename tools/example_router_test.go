package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/tools/tooltest"
)

// startAsked starts stage on a runtime of its own and writes it one
// request on stream s1, its "messages" parameter msgs. close closes the
// runtime, waiting at most until ctx ends.
func startAsked(ctx context.Context, stage actors.Spec, msgs string) (conn *actors.Conn, close func()) {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	if conn, err = rt.Start(stage); err != nil {
		panic(err)
	}
	_ = conn.SendAll(messages.RawParam("s1", "messages", json.RawMessage(msgs)), messages.End("s1"))
	return conn, func() { rt.Close(ctx) }
}

// runStage starts stage, sends one request on stream s1 and returns the
// frames the model received (up to the n-th one) once the stream's END
// came back.
func runStage(stage actors.Spec, received <-chan *messages.Frame, n int) []*messages.Frame {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, close := startAsked(ctx, stage, `[{"role":"user","content":"2+3?"}]`)
	defer close()
	if _, err := conn.RecvStream(ctx, "s1"); err != nil {
		panic(err)
	}
	var out []*messages.Frame
	for len(out) < n {
		out = append(out, <-received)
	}
	return out
}

// A router runs the model's tool calls and writes each result back into
// the model's sink; the call does not reach the consumer.
func ExampleNewRouter() {
	received := make(chan *messages.Frame, 16)
	model := tooltest.ScriptedModel("model", [][]*messages.Frame{
		{messages.ToolCall("", "c1", "add", json.RawMessage(`{"a":2,"b":3}`)), messages.End("")},
	}, func(f *messages.Frame) { received <- f })
	router, err := tools.NewRouter(model, &tools.RouterOptions{Handlers: map[string]tools.HandlerFunc{
		"add": func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ A, B int }
			err := json.Unmarshal(args, &in)
			return in.A + in.B, err
		},
	}})
	if err != nil {
		panic(err)
	}
	for _, f := range runStage(router, received, 3) {
		fmt.Println(messages.Format(f))
	}
	// Output:
	// PARAM stream=s1 name=messages payload=[{"role":"user","content":"2+3?"}]
	// END stream=s1
	// TOOL_RESULT stream=s1 id=c1 name=add payload=5
}

// A streaming router gathers a call's argument chunks and runs the call
// once it is complete.
func ExampleNewStreamingRouter() {
	received := make(chan *messages.Frame, 16)
	model := tooltest.ScriptedModel("model", [][]*messages.Frame{{
		messages.StreamingToolCall("", "c1", "add"),
		messages.ToolArgChunk("", "c1", `{"a":2,`),
		messages.ToolArgChunk("", "c1", `"b":3}`),
		messages.ToolComplete("", "c1"),
		messages.End(""),
	}}, func(f *messages.Frame) { received <- f })
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds two integers"},
		func(_ context.Context, in struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return in.A + in.B, nil
		})
	router, err := tools.NewStreamingRouter(model, &tools.RouterOptions{Tools: []*tools.Tool{add}})
	if err != nil {
		panic(err)
	}
	fmt.Println(messages.Format(runStage(router, received, 3)[2]))
	// Output:
	// TOOL_RESULT stream=s1 id=c1 name=add payload=5
}

// An installer puts the tools, the tool choice and a system prompt in
// front of every request it passes to the model.
func ExampleNewInstaller() {
	received := make(chan *messages.Frame, 16)
	model := tooltest.ScriptedModel("model", [][]*messages.Frame{{messages.Text("", "5"), messages.End("")}},
		func(f *messages.Frame) { received <- f })
	installer, err := tools.NewInstaller(model, &tools.InstallerOptions{
		ToolsParam:   json.RawMessage(`[]`),
		ToolChoice:   json.RawMessage(`"none"`),
		SystemPrompt: "Answer with a number.",
	})
	if err != nil {
		panic(err)
	}
	for _, f := range runStage(installer, received, 4) {
		fmt.Println(messages.Format(f))
	}
	// Output:
	// PARAM stream=s1 name=tools payload=[]
	// PARAM stream=s1 name=tool_choice payload="none"
	// PARAM stream=s1 name=messages payload=[{"role":"system","content":"Answer with a number."},{"role":"user","content":"2+3?"}]
	// END stream=s1
}

// Supervision options: the tool actors of a router restart after a
// panic (the call is answered with an error result of kind "panic"), at
// most MaxRestarts times within Within before the tool is stopped.
func ExampleRouterOptions_supervision() {
	received := make(chan *messages.Frame, 16)
	model := tooltest.ScriptedModel("model", [][]*messages.Frame{
		{messages.ToolCall("", "c1", "flaky", json.RawMessage(`{}`)), messages.End("")},
	}, func(f *messages.Frame) { received <- f })
	flaky := tools.MustNew(tools.Definition{Name: "flaky", Handler: func(context.Context, json.RawMessage) (any, error) {
		panic("flaky tool")
	}})
	router, err := tools.NewAsyncRouter(model, &tools.RouterOptions{
		Tools:       []*tools.Tool{flaky},
		Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: 3, Within: time.Minute}),
	})
	if err != nil {
		panic(err)
	}
	result := runStage(router, received, 3)[2]
	fmt.Println(result.IsErrorResult(), tools.KindOf(result))
	// Output:
	// true panic
}
