package agent_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// TestWatchActors_PanickingWatcherDoesNotHang: a Runtime.WatchActors
// callback with a bug that panics is called on the actor's own goroutine,
// in the shell's start and stop paths. Unguarded, the agent's loop failed
// at every start and never got through its stop: Run got no answer and
// hung until its ctx ended, and Close waited for the loop for ever. The
// panic is logged instead: Run answers and Close returns, both long
// before testCtx's guard ends.
func TestWatchActors_PanickingWatcherDoesNotHang(t *testing.T) {
	var logs syncbuf.Buffer
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var seen map[string]int // the watcher's bug: a map never made
	defer rt.WatchActors(func(ev actors.ActorEvent) { seen[ev.Actor.ID]++ })()
	a, err := agent.New(rt, model(t, scripted.Turn{Text: "Done."}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := a.Run(testCtx(t), "s1", ask)
	if err != nil || ans.Text != "Done." {
		t.Errorf("Run: %v, %v; want the answer despite the watcher", ans, err)
	}
	if err := a.Close(testCtx(t)); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !strings.Contains(logs.String(), "actor watcher panicked") {
		t.Errorf("the watcher's panic was not logged:\n%s", logs.String())
	}
}
