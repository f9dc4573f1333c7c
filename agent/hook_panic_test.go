package agent_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// TestSupervision_PanickingHookIsContained: supervision hooks
// (RuntimeOptions.OnSupervision and a Runtime.WatchSupervision watcher)
// with a bug that panics at every decision (a write to a nil map), when
// a tool loop crashes. Unguarded, the panic failed the supervisor inside
// HandleFailure, which escalated; the guardian's strategy reported to the
// same hook, panicked again inside protoactor's escalation path, and the
// panic was raised again out of the mailbox goroutine, killing the host
// process. The panics are logged instead, the crash stays contained by
// the loop's supervisor (the loop restarts) and the Run answers.
//
// The Run runs in a child process (this test binary run again), which
// must exit normally: a regression kills the process, not the test run.
func TestSupervision_PanickingHookIsContained(t *testing.T) {
	if os.Getenv("POLYWEAVE_HOOK_CHILD") == "1" {
		panickingHookRun(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSupervision_PanickingHookIsContained$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "POLYWEAVE_HOOK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 3000 {
			out = out[:3000]
		}
		t.Fatalf("the host process failed when supervision hooks panicked: %v\n%s", err, out)
	}
}

func panickingHookRun(t *testing.T) {
	var seen, watched map[string]int // the hooks' bug: maps never made
	var logs syncbuf.Buffer
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnSupervision: func(ev supervisor.Event) { seen[ev.Child]++ }})
	defer rt.WatchSupervision(func(ev supervisor.Event) { watched[ev.Child]++ })()
	var crashed atomic.Bool
	a := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "Done."},
	), &agent.Options{Tools: []*tools.Tool{echo(nil)}, OnToolResult: func(tools.ToolResultEvent) {
		if crashed.CompareAndSwap(false, true) {
			panic("injected: loop crash")
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ans, err := a.Run(ctx, "s1", ask)
	if err != nil || ans.Text != "Done." {
		t.Errorf("Run: %v, %v; want the answer after the loop's restart", ans, err)
	}
	for _, hook := range []string{"OnSupervision panicked", "supervision watcher panicked"} {
		if !strings.Contains(logs.String(), hook) {
			t.Errorf("no %q in the log:\n%s", hook, logs.String())
		}
	}
}
