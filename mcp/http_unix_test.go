package mcp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// A client of a Unix domain socket is on this machine: the loopback-only
// guard serves it without AllowRemote or a token.
func TestHandler_UnixSocketClientIsThisMachines(t *testing.T) {
	srv := guardServer(t)
	h := handler(t, srv, nil) // loopback only, no token
	sock := filepath.Join(t.TempDir(), "mcp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(initBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		t.Fatalf("a client on this machine's Unix socket was refused: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
}
