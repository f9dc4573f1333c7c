//go:build linux

package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/workspace/sandbox"
)

// Warm reports the state of the preparation it waited for, or of one
// started since: not an earlier failure a command has mended meanwhile.
// Here the preparation Warm starts fails (too many paths to hide);
// before Warm looks, the host removes them, and a command prepares a
// sandbox of its own, runs, and starts preparing the next one. Warm
// waits for that one and reports the sandbox ready.
func TestWarm_ReportsTheCurrentPreparation(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	ws, err := New(dir, &Options{Sandbox: SandboxRequired, HidePaths: []string{filepath.Join(dir, "*.pem")}})
	mustDo(t, err)
	defer ws.Close()
	dropWarm(ws)
	for i := range sandbox.MaxHidden + 1 {
		mustDo(t, os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".pem"), nil, 0o600))
	}

	// The next command's preparation, started as the command ends, waits
	// until Warm waits for it (or its context ends).
	next := make(chan struct{})
	var once sync.Once
	letNextGo := func() { once.Do(func() { close(next) }) }
	defer letNextGo()
	var armed atomic.Bool
	var prepares atomic.Int64
	ws.hookPrepare = func(ctx context.Context) error {
		if armed.Load() && prepares.Add(1) == 2 {
			select {
			case <-next:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	var ran string
	ws.hookWarm = func(n int, waited bool) {
		switch {
		case n == 0 && waited: // Warm's preparation failed
			matches, err := filepath.Glob(filepath.Join(dir, "*.pem"))
			mustDo(t, err)
			for _, m := range matches {
				mustDo(t, os.Remove(m))
			}
			armed.Store(true)
			ran = runSandboxed(t, ws, "echo ran").Stdout
		case n == 1 && !waited:
			letNextGo()
		}
	}
	err = ws.Warm(context.Background())
	if ran != "ran\n" {
		t.Fatalf("the command meanwhile: %q", ran)
	}
	if err != nil {
		t.Errorf("Warm, with the next sandbox under way after a command that ran: %v; want its outcome, not the earlier failure", err)
	}
	ws.warmMu.Lock()
	ready := ws.warm != nil
	ws.warmMu.Unlock()
	if err == nil && !ready {
		t.Errorf("Warm returned nil with no sandbox ready")
	}
}

// Warm returns once the preparation it waited for has set a sandbox
// up, even when a command took that sandbox meanwhile and started
// preparing the next one: it does not wait for that one too (commands
// that keep coming would hold it for as long as they come).
func TestWarm_ReturnsOnceItsPreparationSetASandboxUp(t *testing.T) {
	requireSandbox(t)
	ws, err := New(t.TempDir(), &Options{Sandbox: SandboxRequired})
	mustDo(t, err)
	defer ws.Close()
	dropWarm(ws)
	// The second preparation (the next command's, started as the command
	// ends) waits until Warm waits for it, or its context ends.
	next := make(chan struct{})
	var once sync.Once
	letNextGo := func() { once.Do(func() { close(next) }) }
	defer letNextGo()
	var prepares atomic.Int64
	ws.hookPrepare = func(ctx context.Context) error {
		if prepares.Add(1) == 2 {
			select {
			case <-next:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	var ran string
	waits := 0
	ws.hookWarm = func(n int, waited bool) {
		waits = max(waits, n+1)
		switch {
		case n == 0 && waited: // Warm's preparation is done: a command takes its sandbox
			ran = runSandboxed(t, ws, "echo ran").Stdout
		case n == 1 && !waited:
			letNextGo()
		}
	}
	err = ws.Warm(context.Background())
	if ran != "ran\n" {
		t.Fatalf("the command meanwhile: %q", ran)
	}
	if err != nil || waits != 1 {
		t.Errorf("Warm = %v after waiting for %d preparations; want nil after its own", err, waits)
	}
}
