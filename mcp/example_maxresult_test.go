package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// A result larger than ServerOptions.MaxResultBytes is not sent: the
// call is answered with an isError result that gives both sizes, of
// failure kind too_large, and the client's session goes on. Here the
// client is go-sdk's, over streamable HTTP on loopback.
func ExampleServerOptions_maxResultBytes() {
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	report := tools.MustNew(tools.Definition{Name: "report", Description: "Writes a long report",
		Handler: func(context.Context, json.RawMessage) (any, error) { return strings.Repeat("all is well\n", 1000), nil }})
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{report}, MaxResultBytes: 4 << 10})
	if err != nil {
		panic(err)
	}
	defer srv.Close(context.Background())
	h, err := srv.ListenHTTP(nil) // a free port of loopback
	if err != nil {
		panic(err)
	}
	defer h.Close(context.Background())

	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.URL()}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "report", Arguments: map[string]any{}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("isError=%v kind=%v\n%s\n", res.IsError, res.Meta[mcp.FailureKindMeta], res.Content[0].(*sdk.TextContent).Text)
	// Output:
	// isError=true kind=too_large
	// Tool report ran, but its result is too large to send: 13039 bytes, limit 4096
}
