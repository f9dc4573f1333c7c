package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

func noopSDKServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "{}"}}}, nil
		})
	return s
}

func benchCalls(b *testing.B, run func(context.Context, sdk.Transport) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "b", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	params := &sdk.CallToolParams{Name: "noop", Arguments: json.RawMessage(`{}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cs.Close()
	cancel()
	<-done
}

// BenchmarkServerRoundTrip: tools/call of a no-op tool through our server
// (a TOOL_CALL through the router and a tool actor) and through the
// go-sdk's own server, over the same in-memory transport. Goal: ≤ 1.3×.
func BenchmarkServerRoundTrip(b *testing.B) {
	b.Run("go-sdk", func(b *testing.B) { benchCalls(b, noopSDKServer().Run) })
	b.Run("polyweave", func(b *testing.B) {
		rt := actorstest.NewRuntime(b, nil)
		srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "noop"})}})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close(context.Background())
		benchCalls(b, srv.Run)
	})
}

// BenchmarkImportedCall: one call of a go-sdk server's no-op tool over
// streamable HTTP, from the go-sdk client directly and through an
// imported tool's handler. Goal: ≤ 1.2×.
func BenchmarkImportedCall(b *testing.B) {
	s := noopSDKServer()
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	defer hs.Close()
	ctx := context.Background()
	b.Run("go-sdk-client", func(b *testing.B) {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "b", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &sdk.CallToolParams{Name: "noop", Arguments: json.RawMessage(`{}`)}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("imported", func(b *testing.B) {
		// The HTTP server outlives this runtime: no per-runtime leak check.
		rt, err := actors.NewRuntime(nil)
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		im, err := mcp.Import(ctx, rt, &mcp.ImportOptions{URL: hs.URL})
		if err != nil {
			b.Fatal(err)
		}
		defer im.Close(ctx)
		h := im.Tools()[0].Definition().Handler
		args := json.RawMessage(`{}`)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h(ctx, args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
