package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/tools"
)

// TestMember_RestartedLoopResumesTheSession: a session's loop that fails
// while its store works (here a panic of its OnToolResult hook, after
// the first call's result) is restarted by its supervisor, which closes
// the session's stream with ERROR and END; the restarted loop reloads
// the session from the store and waits for its first request again. The
// member sends it, and the session goes on to its answer in the same
// incarnation: the call that completed is not run again, the second one
// runs, and Run returns the answer rather than a failed session.
func TestMember_RestartedLoopResumesTheSession(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	inner := sessionFunc(t, 2, side, nil)
	var panicked atomic.Bool
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: func(id string) (actors.Spec, *tools.LoopOptions, error) {
			model, opts, err := inner(id)
			if err != nil {
				return model, opts, err
			}
			opts.OnToolResult = func(tools.ToolResultEvent) {
				if panicked.CompareAndSwap(false, true) {
					panic("a bug of the hook, once")
				}
			}
			return model, opts, nil
		},
		Hold: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil {
		t.Fatalf("Run of a session whose loop was restarted once: %v; want its answer", err)
	}
	if !panicked.Load() {
		t.Fatal("the hook never panicked: the loop was not restarted")
	}
	if res.Text != "All done." || res.Epoch != 1 {
		t.Errorf("result %+v, want \"All done.\" at epoch 1 (the same incarnation)", res)
	}
	if got, want := fmt.Sprint(side.runs(t)), fmt.Sprint(map[string]int{"s c1": 1, "s c2": 1}); got != want {
		t.Errorf("side effects %s, want %s (each call once)", got, want)
	}
}
