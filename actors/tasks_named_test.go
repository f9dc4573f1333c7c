package actors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// TestRuntime_CloseNamesTheActorsOfTasksLeft: a Close whose ctx ends
// while tasks started with Context.Go still run names the actors that
// started them.
func TestRuntime_CloseNamesTheActorsOfTasksLeft(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	started, release, ended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	stubborn := actors.Spec{Name: "stubborn", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if _, ok := msg.(*messages.Frame); ok {
				c.Go("work", func(context.Context, func(any)) any { // ignores its ctx
					close(started)
					<-release
					close(ended)
					return nil
				})
			}
		})
	}}
	conn, err := rt.Start(stubborn)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("s", "go")); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = rt.Close(ctx)
	close(release)
	<-ended
	if err == nil || !strings.Contains(err.Error(), "1 background task(s) still running, started by ") || !strings.Contains(err.Error(), "stubborn") {
		t.Fatalf("close: %v, want it to name the stubborn actor", err)
	}
}
