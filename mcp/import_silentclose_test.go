package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/mcp"
)

// TestImport_CloseOfASilentServerReturnsWhenItsContextEnds: closing an
// import whose server went silent (it takes requests and never answers
// them, the session's DELETE included) returns when Close's context ends,
// while the server still holds the DELETE. The DELETE is given up then
// too: the rest of the teardown ends without the server ever answering,
// Close called again says the server was not told the session ended, and
// nothing of the import is left running.
func TestImport_CloseOfASilentServerReturnsWhenItsContextEnds(t *testing.T) {
	before := goleak.IgnoreCurrent()
	server := sdk.NewServer(&sdk.Implementation{Name: "silent", Version: "1"}, nil)
	server.AddTool(echoTool("echo"))
	inner := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	var silent atomic.Bool
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deleteEnded := make(chan struct{})
	var deleteOnce sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !silent.Load() {
			inner.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodDelete {
			defer deleteOnce.Do(func() { close(deleteEnded) })
			cancel() // Close's context ends while the server holds the DELETE
		}
		select { // silent: the request is held until the client gives it up, or the test ends it
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hs.Close)
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{URL: hs.URL, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	silent.Store(true)
	err = im.Close(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Close answered %v; want its context's error", err)
	}
	// The server never answers: the teardown ends all the same, the
	// DELETE given up when Close's context ended.
	err = im.Close(context.Background())
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not told the session ended") {
		t.Errorf("Close again answered %v; want it to say the session's DELETE was given up when Close's context ended", err)
	}
	<-deleteEnded // the server saw the DELETE given up
	close(release)
	endHTTPTest(t, server, hs, rt, before)
}

// endHTTPTest ends what an import test over HTTP started: the server's
// sessions, the HTTP server and the runtime; then nothing of the test is
// left running.
func endHTTPTest(t *testing.T, server *sdk.Server, hs *httptest.Server, rt *actors.Runtime, before goleak.Option) {
	t.Helper()
	for ss := range server.Sessions() {
		_ = ss.Close()
	}
	hs.Close()
	if err := rt.Close(context.Background()); err != nil {
		t.Error(err)
	}
	leakcheck.VerifyNone(t, before)
}
