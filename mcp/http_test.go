package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/internal/loopback"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// listenHTTP serves the test tools over HTTP and returns the URL and the
// runtime (whose leak check runs after the server is closed).
func listenHTTP(t *testing.T, opts *mcp.HTTPOptions) (string, *actors.Runtime) {
	t.Helper()
	_, ts := testTools(t)
	rt := actorstest.NewRuntime(t, nil)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	h, err := srv.ListenHTTP(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h.URL(), rt
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHTTP_RefusesForeignHostAndOrigin(t *testing.T) {
	url, _ := listenHTTP(t, nil)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"loopback", nil, http.StatusOK},
		{"localhost host and origin", map[string]string{"Host": "localhost:1234", "Origin": "http://localhost:1234"}, http.StatusOK},
		{"rebound host", map[string]string{"Host": "evil.example.com"}, http.StatusForbidden},
		{"foreign origin", map[string]string{"Origin": "http://evil.example.com"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
	} {
		if got := post(t, url, tc.header); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestHTTP_BearerToken(t *testing.T) {
	url, rt := listenHTTP(t, &mcp.HTTPOptions{BearerToken: "s3cret"})
	if got := post(t, url, nil); got != http.StatusUnauthorized {
		t.Errorf("no token: %d", got)
	}
	if got := post(t, url, map[string]string{"Authorization": "Bearer wrong"}); got != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", got)
	}
	// The importer sends the token; through it, a tool works.
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: url, BearerToken: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close(context.Background())
	res := runLoop(t, rt, im.Tools(), scriptedCall("e", "echo", `{"n":7}`)...)
	if f := res["e"]; f == nil || f.IsErrorResult() || string(f.GetPayload()) != `{"n":7}` {
		t.Fatalf("echo over HTTP: %v", f)
	}
}

func TestHTTP_GoClient(t *testing.T) {
	url, _ := listenHTTP(t, nil)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := callTool(t, cs, "run_command", map[string]any{"command": "echo hi"}); res.IsError || !strings.Contains(text(res), "hi") {
		t.Fatalf("run_command over HTTP: %s", text(res))
	}
}

// ListenHTTP refuses an address beyond loopback unless AllowRemote. It
// checks a name by what it resolves to, and listens at the loopback IP it
// checked: a name all of whose addresses are loopback ones will do, and
// localhost will not when it resolves elsewhere.
func TestListenHTTP_RefusesRemoteByDefault(t *testing.T) {
	loopback.FakeNames(t, map[string][]string{"loop.example": {"::1", "127.0.0.1"}, "localhost": {"192.168.1.20"}})
	_, ts := testTools(t)
	rt := actorstest.NewRuntime(t, nil)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	for _, addr := range []string{"0.0.0.0:0", "localhost:0"} {
		if h, err := srv.ListenHTTP(&mcp.HTTPOptions{Addr: addr}); !errors.Is(err, mcp.ErrNotLoopback) {
			if h != nil {
				_ = h.Close(context.Background())
			}
			t.Errorf("%s without AllowRemote (localhost resolving to 192.168.1.20): %v, want ErrNotLoopback", addr, err)
		}
	}
	h, err := srv.ListenHTTP(&mcp.HTTPOptions{Addr: "loop.example:0"})
	if err != nil {
		t.Fatalf("loop.example:0: %v", err)
	}
	defer h.Close(context.Background())
	if !strings.HasPrefix(h.URL(), "http://127.0.0.1:") {
		t.Errorf("serving at %s, want 127.0.0.1, the address checked", h.URL())
	}
}

// An error result keeps the tool's own JSON across MCP: the server sends
// it as the text and the structuredContent of an isError result, and the
// importer makes an error result of that JSON again, so that a model on
// either side reads what the tool answered (read_file's refusal names
// the path). A plain error still reads as its message alone.
func TestHTTP_ErrorResultsKeepTheirJSON(t *testing.T) {
	url, rt := listenHTTP(t, nil)
	const refusal = `"path":"../outside.txt"`
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callTool(t, cs, "read_file", map[string]any{"path": "../outside.txt"})
	sc, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(string(sc), refusal) || !strings.Contains(text(res), refusal) {
		t.Errorf("read_file refused over MCP: isError %v, structuredContent %s, text %s; want both to hold %s",
			res.IsError, sc, text(res), refusal)
	}
	if k := res.Meta[mcp.FailureKindMeta]; k != string(tools.FailureInvalidArguments) {
		t.Errorf("read_file refused over MCP: _meta %v, want the failure kind invalid_arguments", res.Meta)
	}
	if res := callTool(t, cs, "fail", nil); !res.IsError || text(res) != "it broke" {
		t.Errorf("handler error over MCP: isError %v, text %q, want the message alone", res.IsError, text(res))
	}
	// run_command's refusal does not match its output schema (no stdout,
	// no exitCode): a client that checks structuredContent against it
	// would refuse the result, so it is sent as text only.
	if res := callTool(t, cs, "run_command", map[string]any{"command": " "}); !res.IsError || res.StructuredContent != nil ||
		text(res) != "run_command: empty command" {
		t.Errorf("empty command over MCP: isError %v, structuredContent %v, text %q", res.IsError, res.StructuredContent, text(res))
	}

	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close(context.Background())
	got := runLoop(t, rt, im.Tools(), scripted.Turn{ToolCalls: []scripted.ToolCall{
		{ID: "read", Name: "read_file", Arguments: `{"path":"../outside.txt"}`},
		{ID: "fail", Name: "fail"},
		{ID: "empty", Name: "run_command", Arguments: `{"command":" "}`},
		{ID: "missing", Name: "read_file", Arguments: `{"path":"missing.txt"}`},
	}}, scripted.Turn{Text: "done"})
	if f := got["read"]; f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), refusal) ||
		!strings.HasPrefix(string(f.GetPayload()), `{"success":false,"error":`) { // as read_file wrote it
		t.Errorf("read_file refused through the importer: %v; want an error result holding %s", f, refusal)
	}
	// The kinds come back: a refusal does not count against the imported
	// tool's circuit breaker, a broken handler does.
	for id, want := range map[string]tools.FailureKind{"read": tools.FailureInvalidArguments,
		"empty": tools.FailureInvalidArguments, "fail": tools.FailureHandler, "missing": tools.FailureNotFound} {
		if f := got[id]; tools.KindOf(f) != want {
			t.Errorf("%s through the importer: kind %q, want %q (%v)", id, tools.KindOf(f), want, f)
		}
	}
	if f := got["fail"]; f == nil || !f.IsErrorResult() || string(f.GetPayload()) != `{"success":false,"error":"it broke"}` {
		t.Errorf("handler error through the importer: %v", f)
	}
	if f := got["empty"]; f == nil || string(f.GetPayload()) != `{"success":false,"error":"run_command: empty command"}` {
		t.Errorf("empty command through the importer: %v", f)
	}
}
