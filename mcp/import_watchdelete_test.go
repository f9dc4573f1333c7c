package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// TestImport_CloseHearsOfTheDeleteAWatchRuns: the keepalive finds the
// server silent and its watch closes the session, whose DELETE the
// server holds; Close, whose context has ended, gives that DELETE up,
// and the teardown's error says the server was not told, though the
// DELETE is the watch's, not the teardown's. (The server takes no
// second session, so that no DELETE of the teardown's own says so.)
func TestImport_CloseHearsOfTheDeleteAWatchRuns(t *testing.T) {
	deleting := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	sessions := 0
	srv := postServer(t, func(_ http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(deleting) })
		<-r.Context().Done() // held until the client gives it up
	}, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		switch req.Method {
		case "ping":
			<-r.Context().Done() // silent
			return
		case "initialize":
			mu.Lock()
			sessions++
			first := sessions == 1
			mu.Unlock()
			if !first { // no second session: the teardown has none to end
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32603,"message":"no more sessions"}}`)
				return
			}
			w.Header().Set("Mcp-Session-Id", "only")
		}
		writeBound(w, body)
	})
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: srv.URL, KeepAlive: 100 * time.Millisecond, KeepAliveMisses: 1})
	if err != nil {
		t.Fatal(err)
	}
	<-deleting // the watch is closing the session
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := im.Close(ended); err == nil {
		t.Fatal("Close with an ended context: nil error")
	}
	err = im.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "server was not told the session ended") {
		t.Fatalf("Close: %v; want it to say the server was not told the session ended", err)
	}
}
