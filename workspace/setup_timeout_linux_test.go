//go:build linux

package workspace

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The sandbox New sets up to learn the protections is bounded by
// Options.SetupTimeout: a set-up that hangs is stopped, and New fails
// with an error that names the step and the option and wraps
// context.DeadlineExceeded, rather than hang (here a backstop would end
// the set-up after a while, and the test would fail).
func TestNew_SetupTimeoutBoundsTheSandboxSetUp(t *testing.T) {
	requireSandbox(t)
	for _, mode := range []SandboxMode{SandboxAuto, SandboxRequired} {
		backstop := make(chan struct{})
		timer := time.AfterFunc(10*time.Second, func() { close(backstop) })
		var ended, unbounded atomic.Int64
		hookNew = func(w *Workspace) {
			w.hookPrepare = func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					ended.Add(1)
					return ctx.Err()
				case <-backstop:
					unbounded.Add(1)
					return errors.New("the set-up was never bounded (backstop)")
				}
			}
		}
		ws, err := New(t.TempDir(), &Options{Sandbox: mode, SetupTimeout: 100 * time.Millisecond})
		hookNew = nil
		timer.Stop()
		if err == nil {
			ws.Close()
			t.Fatalf("Sandbox %d: New whose sandbox set-up hangs succeeded", mode)
		}
		if unbounded.Load() != 0 || ended.Load() != 1 {
			t.Errorf("Sandbox %d: New's sandbox set-up: %d ended with its context, %d went on until the backstop; want it bounded", mode, ended.Load(), unbounded.Load())
		}
		if !strings.Contains(err.Error(), "SetupTimeout") || !strings.Contains(err.Error(), "set up") ||
			!errors.Is(err, context.DeadlineExceeded) ||
			(mode == SandboxRequired && !errors.Is(err, ErrSandboxUnavailable)) {
			t.Errorf("Sandbox %d: New whose sandbox set-up hangs: %v; want an error naming the set-up and Options.SetupTimeout, "+
				"wrapping context.DeadlineExceeded (and ErrSandboxUnavailable with SandboxRequired)", mode, err)
		}
	}
}

func TestNew_RefusesNegativeSetupTimeout(t *testing.T) {
	if _, err := New(t.TempDir(), &Options{SetupTimeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "SetupTimeout") {
		t.Errorf("New with a negative SetupTimeout: %v, want it refused", err)
	}
}
