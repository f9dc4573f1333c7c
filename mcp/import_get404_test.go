package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestImport_NotFoundForTheEventStreamKeepsTheSession: a streamable HTTP
// server that answers the client's GET for its event stream with 404
// (as many do, instead of 405: go-sdk tolerates it and goes on without
// the stream) still knows the session. A call the server answers with a
// JSON-RPC error afterwards is that call's error; the session is kept
// and the next call runs on it: a 404 is the server forgetting the
// session only when it answers a request of the session (a POST), not
// the optional stream.
func TestImport_NotFoundForTheEventStreamKeepsTheSession(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "no-stream", Version: "1"}, nil)
	server.AddTool(echoTool("echo"))
	server.AddTool(&sdk.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, errors.New("it broke") // a JSON-RPC error answer
		})
	inner := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	rt := actorstest.NewRuntime(t, nil)
	im := imported(t, rt, &mcp.ImportOptions{URL: hs.URL, CallTimeout: 5 * time.Second})
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "fail", Name: "fail"}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "echo", Name: "echo"}}},
		scripted.Turn{Text: "done"})
	if f := res["fail"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "it broke") {
		t.Errorf("fail: %v; want its error result", f)
	}
	if f := res["echo"]; f == nil || f.IsErrorResult() {
		t.Errorf("echo: %v; want its result", f)
	}
	if n := im.Connections(); n != 1 {
		t.Errorf("%d connections, want 1: the session was kept", n)
	}
}

// TestImport_ServerThatMovedIsGivenUpSayingWhy: a server whose endpoint
// is gone (it moved: every request is now answered 404, as by a wrong
// URL) is connected to again, as for a server that forgot the session,
// until the supervision gives up; the calls then made are answered with
// an error saying why the connection failed (the 404), not only that it
// was given up.
func TestImport_ServerThatMovedIsGivenUpSayingWhy(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "moving", Version: "1"}, nil)
	server.AddTool(echoTool("echo"))
	inner := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	var moved atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if moved.Load() {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	rt := actorstest.NewRuntime(t, nil)
	t.Cleanup(func() { // before the leak check: the client could not end its session
		for ss := range server.Sessions() {
			_ = ss.Close()
		}
	})
	sup, err := supervisor.New(&supervisor.Options{MaxRestarts: 2, Within: time.Hour, InitialBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	im := imported(t, rt, &mcp.ImportOptions{URL: hs.URL, CallTimeout: time.Minute, Supervision: sup})
	moved.Store(true)
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "first", Name: "echo"}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "second", Name: "echo"}}},
		scripted.Turn{Text: "done"})
	if f := res["first"]; f == nil || !f.IsErrorResult() {
		t.Errorf("first: %v; want an error result", f)
	}
	f := res["second"]
	if f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "given up") || !strings.Contains(string(f.GetPayload()), "Not Found") {
		t.Errorf("second: %v; want an error saying the connection was given up, and why (Not Found)", f)
	}
}
