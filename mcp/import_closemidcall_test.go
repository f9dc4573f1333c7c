package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestImport_CloseWhileACallIsInFlight: a Close whose context has already
// ended, made while the server holds a call over HTTP, gives up the
// session's DELETE; the call in flight is answered once, with an error
// saying the import was closed (not held until its timeout, which held
// the teardown too), and nothing of the import is left running.
func TestImport_CloseWhileACallIsInFlight(t *testing.T) {
	before := goleak.IgnoreCurrent()
	server := sdk.NewServer(&sdk.Implementation{Name: "holding", Version: "1"}, nil)
	entered := make(chan struct{})
	release := make(chan struct{})
	var enterOnce sync.Once
	server.AddTool(&sdk.Tool{Name: "hold", Description: "Holds the call", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			enterOnce.Do(func() { close(entered) })
			select {
			case <-ctx.Done():
			case <-release:
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "late"}}}, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(hs.Close)
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: hs.URL, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		<-entered
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		closed <- im.Close(ctx)
	}()
	res := runLoop(t, rt, im.Tools(), scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "hold"}}}, scripted.Turn{Text: "done"})
	if f := res["c1"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "the import was closed") {
		t.Errorf("the call in flight when the import closed was answered %v; want an error saying the import was closed", f)
	}
	<-closed
	_ = im.Close(context.Background()) // waits for the teardown; its error is not this test's
	close(release)
	endHTTPTest(t, server, hs, rt, before)
}
