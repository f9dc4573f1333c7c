package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestImport_SilentServerIsFoundByItsPings: a streamable HTTP server
// that stops answering the import's session while calls run on it (a
// stuck process, a connection a proxy holds open) is found by the
// import's keepalive pings: the session is ended, each call in flight is
// answered with one error naming the server (not held until its
// timeout), and the next call runs over a new session.
func TestImport_SilentServerIsFoundByItsPings(t *testing.T) {
	entered := make(chan struct{}, 2)
	stopped := make(chan struct{}) // what waits on the server stops
	stop := sync.OnceFunc(func() { close(stopped) })
	block := tools.MustNew(tools.Definition{Name: "block", Timeout: tools.NoTimeout, Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
		entered <- struct{}{}
		select { // the server never hears that the call was cancelled
		case <-ctx.Done():
		case <-stopped:
		}
		return nil, errors.New("ended")
	}})
	echo := tools.MustNew(tools.Definition{Name: "echo", Handler: func(context.Context, json.RawMessage) (any, error) { return "echoed", nil }})
	rt := actorstest.NewRuntime(t, nil) // the server's and the import's; its leak check comes after both closed
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: []*tools.Tool{block, echo}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := srv.Handler(nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		first  string // the import's first session
		silent atomic.Bool
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		if first == "" {
			first = id
		}
		quiet := silent.Load() && r.Method == http.MethodPost && id != "" && id == first
		mu.Unlock()
		if quiet { // the first session's server answers nothing more
			select {
			case <-r.Context().Done():
			case <-stopped:
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { // before hs.Close, which waits for the calls' streams
		stop()
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})

	im := imported(t, rt, &mcp.ImportOptions{URL: hs.URL, CallTimeout: 30 * time.Second, KeepAlive: 200 * time.Millisecond})
	go func() { // once both calls run on the server, it falls silent
		<-entered
		<-entered
		silent.Store(true)
	}()
	res := runLoop(t, rt, im.Tools(),
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "b1", Name: "block"}, {ID: "b2", Name: "block"}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "echo", Name: "echo"}}},
		scripted.Turn{Text: "done"})
	stop() // the server answers again: the silent session closes at once
	for _, id := range []string{"b1", "b2"} {
		f := res[id]
		if f == nil || !f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), hs.URL) || tools.KindOf(f) == tools.FailureTimeout {
			t.Errorf("%s, in flight as the server fell silent: %v; want an error naming the server, before its timeout", id, f)
		}
	}
	if f := res["echo"]; f == nil || f.IsErrorResult() || !strings.Contains(string(f.GetPayload()), "echoed") {
		t.Errorf("echo, after: %v; want it answered over a new session", f)
	}
	if n := im.Connections(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}
