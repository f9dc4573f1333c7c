package actorstest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// CloseTimeout bounds how long [NewRuntime]'s cleanup waits for Close.
const CloseTimeout = 10 * time.Second

// NewRuntime starts an actor runtime with opts (nil for defaults) that t's
// cleanup closes; the cleanup then fails t if any goroutine started since
// NewRuntime was called is still running. Tests that use it must not run
// in parallel with tests that start goroutines of their own.
func NewRuntime(t testing.TB, opts *actors.RuntimeOptions) *actors.Runtime {
	t.Helper()
	before := goleak.IgnoreCurrent()
	rt, err := actors.NewRuntime(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
		leakcheck.VerifyNone(t, before)
	})
	return rt
}
