package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// figureMCP is figure 9: MCP both ways, each against the go-sdk doing
// the same thing alone.
func figureMCP(c *config) []Row {
	return c.rows([]pair{
		{figure: "9", name: "tools/call round trip, in-memory transport",
			ours: benchSide("polyweave server", benchMCPServerOurs), base: benchSide("go-sdk server", benchMCPServerSDK),
			kind: duration, unit: "call", goal: ratioAtMost(1.3),
			note: "the same no-op tool; ours runs each call as a TOOL_CALL through the router and a tool actor"},
		{figure: "9", name: "imported tool call, streamable HTTP",
			ours: benchSide("imported tool", func(b *testing.B) { benchMCPImport(b, true) }),
			base: benchSide("go-sdk client", func(b *testing.B) { benchMCPImport(b, false) }),
			kind: duration, unit: "call", goal: ratioAtMost(1.2)},
	})
}

// noopSDKServer is a go-sdk server with a no-op tool, as a baseline and
// as the server the import benchmark imports from.
func noopSDKServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "{}"}}}, nil
		})
	return s
}

// benchMCPCalls measures tools/call of "noop" from a go-sdk client to a
// server run by run, over the go-sdk's in-memory transport.
func benchMCPCalls(b *testing.B, run func(context.Context, sdk.Transport) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	params := &sdk.CallToolParams{Name: "noop", Arguments: json.RawMessage(`{}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
	b.StopTimer()
	cs.Close()
	cancel()
	<-done
}

// benchMCPServerSDK: the go-sdk's own server with the no-op tool.
func benchMCPServerSDK(b *testing.B) { benchMCPCalls(b, noopSDKServer().Run) }

// benchMCPServerOurs: mcp.NewServer with a no-op tool, each call a
// TOOL_CALL through the router to the tool actor and back.
func benchMCPServerOurs(b *testing.B) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer closeRuntime(rt)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "noop"})}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(context.Background())
	benchMCPCalls(b, srv.Run)
}

// benchMCPImport measures one call of a go-sdk server's no-op tool over
// streamable HTTP (an httptest server on loopback): from the go-sdk
// client directly (imported false), or through the handler of the tool
// mcp.Import made of it (imported true): the import's own cost is its
// argument handling, the session lookup and the result decoding.
func benchMCPImport(b *testing.B, imported bool) {
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return noopSDKServer() }, nil))
	defer hs.Close()
	ctx := context.Background()
	var call func() error
	if imported {
		rt, err := actors.NewRuntime(runtimeOptions)
		if err != nil {
			b.Fatal(err)
		}
		defer closeRuntime(rt)
		im, err := mcp.Import(ctx, rt, &mcp.ImportOptions{URL: hs.URL})
		if err != nil {
			b.Fatal(err)
		}
		defer im.Close(ctx)
		h, args := im.Tools()[0].Definition().Handler, json.RawMessage(`{}`)
		call = func() error { _, err := h(ctx, args); return err }
	} else {
		hc := &http.Transport{}
		defer hc.CloseIdleConnections()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: hc}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &sdk.CallToolParams{Name: "noop", Arguments: json.RawMessage(`{}`)}
		call = func() error { _, err := cs.CallTool(ctx, params); return err }
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

func closeRuntime(rt *actors.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rt.Close(ctx)
}
