// Command conformance is what the official MCP conformance suite
// (@modelcontextprotocol/conformance) tests, built from package mcp:
//
//	conformance server [-addr 127.0.0.1:0]
//
// serves, over streamable HTTP, the workspace tools of a temporary folder
// and the tools the suite's server scenarios call by name
// (test_simple_text, test_error_handling), printing the endpoint's URL on
// stdout, until interrupted;
//
//	conformance client URL
//
// imports the tools of the MCP server at URL (the suite passes it, and the
// scenario in MCP_CONFORMANCE_SCENARIO) and runs a tool loop whose
// scripted model calls each of them once, with arguments made from its
// input schema. scripts/mcp-conformance.sh runs the suite against both.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
	"github.com/polyweave/polyweave-go/workspace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) >= 2 && os.Args[1] == "server":
		addr := "127.0.0.1:0"
		if len(os.Args) == 4 && os.Args[2] == "-addr" {
			addr = os.Args[3]
		}
		err = serve(ctx, addr)
	case len(os.Args) == 3 && os.Args[1] == "client":
		err = client(ctx, os.Args[2])
	default:
		err = errors.New("usage: conformance server [-addr ADDR] | conformance client URL")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, addr string) error {
	dir, err := os.MkdirTemp("", "polyweave-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ws, err := workspace.New(dir, nil)
	if err != nil {
		return err
	}
	defer ws.Close()
	ts, err := workspace.Tools(ws)
	if err != nil {
		return err
	}
	ts = append(ts,
		tools.MustNew(tools.Definition{Name: "test_simple_text", Description: "Answers a fixed text",
			Handler: func(context.Context, json.RawMessage) (any, error) {
				return "This is a simple text response for testing.", nil
			}}),
		tools.MustNew(tools.Definition{Name: "test_error_handling", Description: "Always fails",
			Handler: func(context.Context, json.RawMessage) (any, error) {
				return nil, errors.New("This tool intentionally returns an error for testing")
			}}),
	)
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Name: "polyweave-conformance", Tools: ts})
	if err != nil {
		return err
	}
	h, err := srv.ListenHTTP(&mcp.HTTPOptions{Addr: addr})
	if err != nil {
		return err
	}
	fmt.Println(h.URL())
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Close(cctx)
	return h.Close(cctx)
}

func client(ctx context.Context, url string) error {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	im, err := mcp.Import(ctx, rt, &mcp.ImportOptions{URL: url, ConnectTimeout: 20 * time.Second, CallTimeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer im.Close(context.WithoutCancel(ctx))
	ts := im.Tools()
	fmt.Fprintf(os.Stderr, "imported %d tools from %s (scenario %q)\n", len(ts), url, os.Getenv("MCP_CONFORMANCE_SCENARIO"))
	if len(ts) == 0 {
		return nil
	}
	var calls []scripted.ToolCall
	for i, t := range ts {
		args, err := json.Marshal(sample(t.Description().Schema))
		if err != nil {
			return err
		}
		calls = append(calls, scripted.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: t.Name(), Arguments: string(args)})
	}
	model := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{ToolCalls: calls}, {Text: "done"}}}, nil)
	loop, err := tools.NewLoop(model.Spec("model"), &tools.LoopOptions{RouterOptions: tools.RouterOptions{Tools: ts}})
	if err != nil {
		return err
	}
	conn, err := rt.Start(loop)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.SendAll(messages.RawParam("s", "messages", json.RawMessage(`[{"role":"user","content":"call every tool"}]`)), messages.End("s")); err != nil {
		return err
	}
	frames, err := conn.RecvStream(ctx, "s")
	if err != nil {
		return err
	}
	for _, f := range frames {
		switch f.GetType() {
		case messages.FrameType_TOOL_RESULT:
			fmt.Fprintf(os.Stderr, "%s: error=%v %s\n", f.GetName(), f.IsErrorResult(), f.GetPayload())
		case messages.FrameType_ERROR:
			return fmt.Errorf("tool loop: %s", f.GetText())
		}
	}
	return nil
}

// sample makes arguments for a JSON Schema: each property gets a value of
// its type (numbers count up, so that a sum is checkable).
func sample(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type any   `json:"type"`
			Enum []any `json:"enum"`
		} `json:"properties"`
	}
	out := map[string]any{}
	if json.Unmarshal(schema, &s) != nil {
		return out
	}
	n := 0
	for name, p := range s.Properties {
		if len(p.Enum) > 0 {
			out[name] = p.Enum[0]
			continue
		}
		switch p.Type {
		case "number", "integer":
			n++
			out[name] = n
		case "boolean":
			out[name] = true
		case "array":
			out[name] = []any{}
		case "object":
			out[name] = map[string]any{}
		default:
			out[name] = "test"
		}
	}
	return out
}
