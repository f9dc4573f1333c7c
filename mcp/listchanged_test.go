package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/tools"
)

// echoTool is a go-sdk tool answering "<name>: <its arguments>".
func echoTool(name string) (*sdk.Tool, sdk.ToolHandler) {
	return &sdk.Tool{Name: name, Description: "Echoes as " + name, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + ": " + string(req.Params.Arguments)}}}, nil
		}
}

func names(ts []*tools.Tool) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return strings.Join(out, ",")
}

// A go-sdk server that adds and removes tools while imported sends
// notifications/tools/list_changed: the import reads the list again,
// reports it, a loop started with the new list calls the added tool, and
// the removed tool answers an error.
func TestImport_ToolListChanged(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "growing", Version: "1"}, nil)
	server.AddTool(echoTool("first"))
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(hs.Close) // after the runtime's leak check: the server predates it
	rt := actorstest.NewRuntime(t, nil)

	changes := make(chan []*tools.Tool, 8)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: hs.URL, Prefix: "g_",
		OnToolsChanged: func(ts []*tools.Tool) { changes <- ts }})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close(context.Background())
	before := im.Tools()
	if names(before) != "g_first" {
		t.Fatalf("imported %s", names(before))
	}
	next := func(want string) []*tools.Tool {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case ts := <-changes:
				if names(ts) == want {
					return ts
				}
				t.Logf("tools changed to %s, waiting for %s", names(ts), want)
			case <-deadline:
				t.Fatalf("the tools never became %s (now %s)", want, names(im.Tools()))
			}
		}
	}

	server.AddTool(echoTool("second"))
	grown := next("g_first,g_second")
	if grown[0] != before[0] {
		t.Error("the unchanged tool was imported again")
	}
	if names(im.Tools()) != "g_first,g_second" {
		t.Errorf("Tools() is %s after the change", names(im.Tools()))
	}
	res := runLoop(t, rt, grown, scriptedCall("c", "g_second", `{"x":1}`)...)
	if f := res["c"]; f == nil || f.IsErrorResult() || string(f.GetPayload()) != `"second: {\"x\":1}"` {
		t.Fatalf("the added tool: %v", f)
	}

	server.RemoveTools("first")
	next("g_second")
	// A router started before the change still has the removed tool: it
	// answers an error instead of reaching the server.
	res = runLoop(t, rt, grown, scriptedCall("gone", "g_first", `{}`)...)
	if f := res["gone"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), `no longer offers tool \"first\"`) {
		t.Fatalf("the removed tool: %v", f)
	}
	if n := im.Connections(); n != 1 {
		t.Errorf("%d connections: a list change is not a reconnection", n)
	}
}

// A server restarted after it died is listed again: a tool it offers now
// is reported and imported.
func TestImport_RestartedServerOffersMore(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	flag := filepath.Join(t.TempDir(), "extra")
	changes := make(chan []*tools.Tool, 4)
	im := importSelf(t, rt, &mcp.ImportOptions{Env: []string{extraEnv + "=" + flag},
		OnToolsChanged: func(ts []*tools.Tool) { changes <- ts }})
	if got := names(im.Tools()); got != "add,block,pid" {
		t.Fatalf("imported %s", got)
	}
	res := runLoop(t, rt, im.Tools(), scriptedCall("pid", "pid", `{}`)...)
	pid := pidOf(t, res["pid"])
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := killPID(pid); err != nil {
		t.Fatal(err)
	}
	select {
	case ts := <-changes:
		if names(ts) != "add,block,extra,pid" {
			t.Fatalf("after the restart: %s", names(ts))
		}
		res = runLoop(t, rt, ts, scriptedCall("x", "extra", `{}`)...)
		if f := res["x"]; f == nil || f.IsErrorResult() {
			t.Fatalf("the new tool: %v", f)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no change reported after the restart (%d connections; tools %s)", im.Connections(), names(im.Tools()))
	}
	if n := im.Connections(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}
