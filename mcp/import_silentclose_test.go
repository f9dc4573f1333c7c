package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/mcp"
)

// TestImport_CloseOfASilentServerReturnsWhenItsContextEnds: closing an
// import whose server went silent (it takes requests and never answers
// them, the session's DELETE included) returns when Close's context ends,
// while the server still holds the DELETE: Close does not wait for it
// (go-sdk gives it up only after its own timeout). The rest of the
// teardown goes on and ends once the server answers: nothing of the
// import is left running.
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
	select {
	case <-deleteEnded:
		t.Errorf("Close returned (%v) only once the DELETE of the session had ended; want it to return when its context ended", err)
	default:
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Close answered %v; want its context's error", err)
	}
	close(release) // the server answers at last: the teardown ends
	for ss := range server.Sessions() {
		_ = ss.Close()
	}
	if err := im.Close(context.Background()); err != nil {
		t.Errorf("Close again, until the teardown ended: %v", err)
	}
	hs.Close()
	if err := rt.Close(context.Background()); err != nil {
		t.Error(err)
	}
	leakcheck.VerifyNone(t, before)
}
