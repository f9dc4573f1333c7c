package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// cpuNote explains the per-CPU-second rows of figure 9.
const cpuNote = "calls per second of the process's CPU time (client and server): what a call costs, whatever share of a busy machine the process gets"

// figureMCP is figure 9: MCP both ways, each against the go-sdk doing
// the same thing alone.
func figureMCP(c *config) []Row {
	return c.rows([]pair{
		{figure: "9", name: "tools/call round trip, in-memory transport",
			ours: benchSide("polyweave server", func(b *testing.B) { benchMCPServerOurs(b, true) }),
			base: benchSide("go-sdk server", benchMCPServerSDK),
			kind: duration, unit: "call", goal: ratioAtMost(1.3),
			note: "the same no-op tool, Sync: ours runs each call as a TOOL_CALL through the router, which runs the handler in its turn"},
		{figure: "9", name: "tools/call round trip, async tool (tool actor)",
			ours: benchSide("polyweave server", func(b *testing.B) { benchMCPServerOurs(b, false) }),
			base: benchSide("go-sdk server", benchMCPServerSDK),
			kind: duration, unit: "call", goal: info},
		{figure: "9", name: "imported tool call, streamable HTTP",
			ours: benchSide("imported tool", func(b *testing.B) { benchMCPImport(b, true) }),
			base: benchSide("go-sdk client", func(b *testing.B) { benchMCPImport(b, false) }),
			kind: duration, unit: "call", goal: ratioAtMost(1.2)},
		{figure: "9", name: "tools/call round trip, per CPU second",
			ours: metricSide("polyweave server", "calls/cpu-s", func(b *testing.B) { benchMCPServerOurs(b, true) }),
			base: metricSide("go-sdk server", "calls/cpu-s", benchMCPServerSDK),
			kind: throughput, unit: "calls per CPU", goal: info, note: cpuNote},
		{figure: "9", name: "imported tool call, per CPU second",
			ours: metricSide("imported tool", "calls/cpu-s", func(b *testing.B) { benchMCPImport(b, true) }),
			base: metricSide("go-sdk client", "calls/cpu-s", func(b *testing.B) { benchMCPImport(b, false) }),
			kind: throughput, unit: "calls per CPU", goal: info, note: cpuNote},
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
	defer runtime.KeepAlive(gcBallast())
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
	b.StopTimer()
	reportCallCPU(b, processCPU()-cpu)
	cs.Close()
	cancel()
	<-done
}

// benchMCPServerSDK: the go-sdk's own server with the no-op tool.
func benchMCPServerSDK(b *testing.B) { benchMCPCalls(b, noopSDKServer().Run) }

// benchMCPServerOurs: mcp.NewServer with a no-op tool, each call a
// TOOL_CALL through the router; sync: the router runs the handler in its
// own turn (as the go-sdk runs it in the request's goroutine), otherwise
// on the tool actor.
func benchMCPServerOurs(b *testing.B, sync bool) {
	rt, err := actors.NewRuntime(runtimeOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer closeRuntime(rt)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{tools.MustNew(tools.Definition{Name: "noop", Sync: sync})}})
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
	defer runtime.KeepAlive(gcBallast())
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCallCPU(b, processCPU()-cpu)
}

// gcBallast is live heap held by both sides of a figure 9 pair while they
// are measured. The go-sdk's transports allocate about 190 KB per message,
// so the garbage collector runs every few calls and how often depends on
// the live heap: without the ballast the baseline (a small heap) collects
// several times as often as our side (a runtime of actors on top), which
// made ours look cheaper than the go-sdk alone. With 64 MiB held by both,
// the heaps differ by a few percent and both collect alike.
func gcBallast() []byte {
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1 // touched, so that it is really there
	}
	return b
}

// reportCallCPU reports calls per second of the process's CPU time (both
// ends of a call run in the process): what a call costs, whatever share
// of a busy machine the process gets.
func reportCallCPU(b *testing.B, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "calls/cpu-s")
	}
}

func closeRuntime(rt *actors.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rt.Close(ctx)
}
