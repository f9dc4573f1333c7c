package mcp_test

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// Serve a tool to an MCP client. Here the client is the go-sdk's, over
// its in-memory transport; srv.ServeStdio or srv.ListenHTTP serve real
// clients. The call is validated against the tool's schema, so the bad
// one is an isError result and never reaches the handler.
func ExampleNewServer() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := tools.MustNewTyped(tools.Definition{Name: "add", Description: "Adds two integers", Idempotent: true},
		func(_ context.Context, in addIn) (string, error) { return fmt.Sprint(in.A + in.B), nil })
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Name: "calculator", Tools: []*tools.Tool{add}})
	if err != nil {
		panic(err)
	}
	defer srv.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, st) }()
	defer func() { cancel(); <-served }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	for _, args := range []map[string]any{{"a": 2, "b": 40}, {"a": "two", "b": 40}} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: args})
		if err != nil {
			panic(err)
		}
		fmt.Printf("isError=%v: %s\n", res.IsError, res.Content[0].(*sdk.TextContent).Text)
	}
	// Output:
	// isError=false: 42
	// isError=true: invalid arguments for tool "add": /a: expected integer, got string
}
