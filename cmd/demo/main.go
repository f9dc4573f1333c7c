// Command demo runs a small Polyweave pipeline and prints the frames that
// flow through it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// scriptedModel answers every request with a tool call and, once it has
// seen the result, with text.
func scriptedModel() actors.Spec {
	return actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch {
		case f.IsParam("messages"):
			emit(messages.ToolCall(f.GetStreamId(), "call_1", "greet", json.RawMessage(`{"name":"Ada"}`)))
		case f.GetType() == messages.FrameType_TOOL_RESULT:
			emit(messages.Text(f.GetStreamId(), "The tool said: "+string(f.GetPayload())))
			emit(messages.End(f.GetStreamId()))
		}
	})
}

// router answers greet calls on the response path and writes the result
// back into the model.
func router() actors.Wrapped {
	return actors.Hooks{OnResponse: func(c actors.WrapperContext, f *messages.Frame) {
		if f.GetType() != messages.FrameType_TOOL_CALL {
			c.ToOuter(f)
			return
		}
		var args struct{ Name string }
		if err := f.Decode(&args); err != nil {
			c.ToInner(messages.ToolError(f.GetStreamId(), f.GetToolCallId(), f.GetName(), err.Error()))
			return
		}
		res, _ := messages.ToolResult(f.GetStreamId(), f.GetToolCallId(), f.GetName(), map[string]string{"greeting": "Hello, " + args.Name})
		c.ToOuter(f)
		c.ToOuter(res)
		c.ToInner(res)
	}}
}

func run(ctx context.Context, out io.Writer) error {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))

	conn, err := rt.Start(actors.Wrap("router", scriptedModel(), router))
	if err != nil {
		return err
	}
	prompt, err := messages.Param("s1", "messages", []map[string]string{{"role": "user", "content": "Greet Ada"}})
	if err != nil {
		return err
	}
	if err := conn.Send(prompt); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	frames, err := conn.RecvStream(ctx, "s1")
	for _, f := range frames {
		fmt.Fprintln(out, messages.Format(f))
	}
	return err
}
