package mcp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestImport_ServerThatForgotTheSessionIsConnectedAgain: a streamable
// HTTP server that restarted (or expired the session) answers every
// request of the old session with 404 and a JSON-RPC error body, as the
// MCP spec asks (§2.5.3) and as the TypeScript SDK's servers do
// ({"code":-32001,"message":"Session not found"}). go-sdk hands that to
// the call as a *jsonrpc.Error (wrapped in ErrRejected, the connection
// kept), which broken() (mcp/import.go) takes for an answer of the
// server; the ping it would otherwise send gets the same 404. The session
// is never dropped, so the import never connects again: every later call
// fails the same way. The call after the one that found the session gone
// must be answered over a new session; the one that found the session
// gone is answered with an error, not run again (it may have run).
func TestImport_ServerThatForgotTheSessionIsConnectedAgain(t *testing.T) {
	testSessionForgotten(t, true)
}

// testSessionForgotten is TestImport_ServerThatForgotTheSessionIsConnectedAgain,
// where the server's 404 has its JSON-RPC error body only when withBody.
func testSessionForgotten(t *testing.T, withBody bool) {
	var gen atomic.Int64 // the server's incarnation: its sessions are "s<gen>"
	var ran atomic.Int64 // the tools/call requests the server ran
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			w.WriteHeader(http.StatusOK)
			return
		case http.MethodPost:
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		current := fmt.Sprint("s", gen.Load())
		if req.Method != "initialize" && r.Header.Get("Mcp-Session-Id") != current {
			id := string(req.ID)
			if id == "" {
				id = "null"
			}
			if !withBody {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32001,"message":"Session not found"}}`)
			return
		}
		w.Header().Set("Mcp-Session-Id", current)
		if len(req.ID) == 0 { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hand","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			ran.Add(1)
			result = `{"content":[{"type":"text","text":"echoed"}]}`
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
	}))
	t.Cleanup(srv.Close)
	rt := actorstest.NewRuntime(t, nil)
	im := imported(t, rt, &mcp.ImportOptions{URL: srv.URL, CallTimeout: 5 * time.Second})
	gen.Add(1) // the server restarts: the import's session is gone
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "first", Name: "echo"}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "second", Name: "echo"}}},
		scripted.Turn{Text: "done"})
	if f := res["first"]; f == nil || !f.IsErrorResult() {
		t.Errorf("the call that found the session gone: %v; want an error result", f)
	}
	t.Logf("first: %s", res["first"].GetPayload())
	if f := res["second"]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "echoed") {
		t.Fatalf("the call after the one that found the session gone: %s (%d connections); want it answered over a new session", f.GetPayload(), im.Connections())
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the server ran %d calls, want 1: the call that found the session gone is not run again", n)
	}
}
