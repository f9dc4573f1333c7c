package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// jsonRPCServer is a minimal streamable HTTP MCP server answering each
// POST with a JSON body: tools "echo" (answers its text), "odd" (answers
// a content block of a type this client does not know, as a server on a
// newer revision of the protocol may) and "fail500" (answers HTTP 502).
// A ping is answered with pingResult, or with a method-not-found error
// when it is empty.
func jsonRPCServer(t *testing.T, pingResult string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if len(req.ID) == 0 { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		if req.Method == "tools/call" && req.Params.Name == "fail500" {
			http.Error(w, "upstream hiccup", http.StatusBadGateway)
			return
		}
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hand","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"odd","inputSchema":{"type":"object"}},{"name":"fail500","inputSchema":{"type":"object"}}]}`
		case "ping":
			if pingResult == "" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32601,"message":"no such method"}}`)
				return
			}
			result = pingResult
		case "tools/call":
			if req.Params.Name == "odd" {
				result = `{"content":[{"type":"hologram"}]}`
			} else {
				result = `{"content":[{"type":"text","text":"echoed"}]}`
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32601,"message":"no such method"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestImport_ResultItCannotReadKeepsTheConnection: a result the client
// cannot decode is that call's error result; the connection is healthy
// (the server answered, and answers a ping), so the next call goes
// through on it instead of waiting, until its timeout, for a
// reconnection that never comes. When the ping fails too, the session is
// closed and the connection made again, and the next call is answered on
// the new one.
func TestImport_ResultItCannotReadKeepsTheConnection(t *testing.T) {
	for _, c := range []struct {
		name, tool, ping string
		connections      int
	}{
		{"undecodable", "odd", "", 1},
		{"http error", "fail500", "", 1},
		{"undecodable and a bad ping", "odd", `"not an object"`, 2},
	} {
		t.Run(c.name, func(t *testing.T) { testBadAnswer(t, c.tool, c.ping, c.connections) })
	}
}

func testBadAnswer(t *testing.T, bad, ping string, connections int) {
	srv := jsonRPCServer(t, ping)
	rt := actorstest.NewRuntime(t, nil)
	im := imported(t, rt, &mcp.ImportOptions{URL: srv.URL, CallTimeout: 5 * time.Second})
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "bad", Name: bad}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "echo", Name: "echo"}}},
		scripted.Turn{Text: "done"})
	if f := res["bad"]; f == nil || !f.IsErrorResult() {
		t.Fatalf("%s: %v, want an error result", bad, f)
	}
	t.Logf("%s: %s", bad, res["bad"].GetPayload())
	if f := res["echo"]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "echoed") {
		t.Fatalf("the call after %q: %s (%d connections); want it answered", bad, f.GetPayload(), im.Connections())
	}
	if n := im.Connections(); n != connections {
		t.Errorf("%d connections, want %d", n, connections)
	}
}

// imported is mcp.Import of o on rt, closed when the test ends.
func imported(t *testing.T, rt *actors.Runtime, o *mcp.ImportOptions) *mcp.Imported {
	t.Helper()
	im, err := mcp.Import(context.Background(), rt, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := im.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return im
}
