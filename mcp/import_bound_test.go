package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// boundServerEnv, set to "1", makes the test binary the stdio server of
// boundAnswer (see TestMain).
const boundServerEnv = "POLYWEAVE_MCP_TEST_BOUND_SERVER"

// exactBound is 2^53+1: an integer a float64 cannot hold (it rounds to
// 2^53).
const exactBound = "9007199254740993"

// boundAnswer answers one JSON-RPC message of a server offering one
// tool, "bounded", whose argument n may be at most exactBound; a call
// answers "took n". It answers nothing (ok false) to a notification.
func boundAnswer(msg []byte) (answer string, ok bool) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &req) != nil || len(req.ID) == 0 {
		return "", false
	}
	var result string
	switch req.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bound","version":"1"}}`
	case "tools/list":
		result = `{"tools":[{"name":"bounded","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":` + exactBound + `}},"required":["n"]}}]}`
	case "tools/call":
		text, _ := json.Marshal("took " + string(req.Params.Arguments))
		result = `{"content":[{"type":"text","text":` + string(text) + `}]}`
	case "ping":
		result = `{}`
	default:
		return `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"no such method"}}`, true
	}
	return `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`, true
}

// boundStdioServer serves boundAnswer over stdio, one message a line.
func boundStdioServer() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		if answer, ok := boundAnswer(in.Bytes()); ok {
			if _, err := fmt.Fprintln(os.Stdout, answer); err != nil {
				return err
			}
		}
	}
	return in.Err()
}

// boundHTTPServer serves boundAnswer over streamable HTTP, answering
// each request in a JSON body, or in an event stream when sse is set.
func boundHTTPServer(t *testing.T, sse bool) *httptest.Server {
	return postServer(t, nil, func(w http.ResponseWriter, r *http.Request, body []byte) {
		answer, ok := boundAnswer(body)
		switch {
		case !ok:
			w.WriteHeader(http.StatusAccepted)
		case sse:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}
	})
}

// writeBound answers body as boundAnswer does, in a JSON body (a
// notification with 202 Accepted).
func writeBound(w http.ResponseWriter, body []byte) {
	answer, ok := boundAnswer(body)
	if !ok {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, answer)
}

// postServer is an HTTP server handing the body of each POST to post,
// a DELETE to del (when set), and answering other requests 405.
func postServer(t *testing.T, del http.HandlerFunc, post func(w http.ResponseWriter, r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			post(w, r, body)
		case r.Method == http.MethodDelete && del != nil:
			del(w, r)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestImport_KeepsExactNumericBounds: a bound of the server's schema
// beyond what a float64 holds exactly is kept as the server wrote it,
// over stdio and streamable HTTP (JSON and event-stream answers): the
// bound itself is taken and sent, one more is refused, naming the bound.
func TestImport_KeepsExactNumericBounds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts func(t *testing.T) *mcp.ImportOptions
	}{
		{"stdio", func(*testing.T) *mcp.ImportOptions {
			return &mcp.ImportOptions{Command: []string{exe, "-test.run=^$"}, Env: []string{boundServerEnv + "=1"}}
		}},
		{"http json", func(t *testing.T) *mcp.ImportOptions { return &mcp.ImportOptions{URL: boundHTTPServer(t, false).URL} }},
		{"http event stream", func(t *testing.T) *mcp.ImportOptions { return &mcp.ImportOptions{URL: boundHTTPServer(t, true).URL} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			o := c.opts(t)
			o.CallTimeout = 10 * time.Second
			im := imported(t, rt, o)
			res := runLoop(t, rt, im.Tools(),
				scripted.Turn{ToolCalls: []scripted.ToolCall{
					{ID: "at", Name: "bounded", Arguments: `{"n":` + exactBound + `}`},
					{ID: "above", Name: "bounded", Arguments: `{"n":9007199254740994}`},
				}},
				scripted.Turn{Text: "done"})
			if f := res["at"]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), exactBound) {
				t.Errorf("n = the bound: %s; want it taken and sent as is", f.GetPayload())
			}
			if f := res["above"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), exactBound) {
				t.Errorf("n = the bound + 1: %s; want it refused, naming the bound %s", f.GetPayload(), exactBound)
			}
		})
	}
}
