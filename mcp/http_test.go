package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
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

func TestListenHTTP_RefusesRemoteByDefault(t *testing.T) {
	_, ts := testTools(t)
	rt := actorstest.NewRuntime(t, nil)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	if _, err := srv.ListenHTTP(&mcp.HTTPOptions{Addr: "0.0.0.0:0"}); !errors.Is(err, mcp.ErrNotLoopback) {
		t.Fatalf("0.0.0.0 without AllowRemote: %v", err)
	}
}
