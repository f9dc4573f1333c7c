//go:build unix

package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// hangLog is the stderr of the test's servers: it sends the pid of a
// server that hangs (see hang) on hanging, and keeps the rest.
type hangLog struct {
	mu      sync.Mutex
	text    strings.Builder
	hanging chan int
}

func (l *hangLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	for line := range strings.Lines(string(p)) {
		var pid int
		if _, err := fmt.Sscanf(line, "hanging %d", &pid); err == nil {
			l.hanging <- pid
		}
	}
	return len(p), nil
}

func (l *hangLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// TestImport_CloseGivenUpKillsAServerHungInInitialize: the server is
// restarted, and the new one hangs in initialize, ignoring both the end
// of its input and SIGTERM. Close, whose context has ended, returns its
// context's error at once; the server is killed then, not after the
// SDK's closing grace (stdin closed, then SIGTERM): it never gets the
// SIGTERM, and it is gone (killed and reaped) once the teardown ends.
func TestImport_CloseGivenUpKillsAServerHungInInitialize(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hangFile := filepath.Join(t.TempDir(), "hang")
	stderr := &hangLog{hanging: make(chan int, 1)}
	rt := actorstest.NewRuntime(t, nil)
	im, err := mcp.Import(context.Background(), rt, &mcp.ImportOptions{Command: []string{exe, "-test.run=^$"},
		Env: []string{serverEnv + "=1", hangEnv + "=" + hangFile}, Stderr: stderr, KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	res := runLoop(t, rt, im.Tools(), scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "pid1", Name: "pid"}}},
		scripted.Turn{Text: "noted"})
	if err := os.WriteFile(hangFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := killPID(pidOf(t, res["pid1"])); err != nil {
		t.Fatal(err)
	}
	pid := <-stderr.hanging // the restart's server hangs in initialize
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := im.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close answered %v; want its context's error", err)
	}
	_ = im.Close(context.Background()) // the teardown has ended
	if strings.Contains(stderr.String(), "SIGTERM") {
		t.Errorf("the hung server was sent SIGTERM after Close's context ended, not killed at once; its stderr:\n%s", stderr)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server process %d still there when the teardown ended: kill 0: %v", pid, err)
	}
}
