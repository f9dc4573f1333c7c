package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestClose_HostDuringToolCalls: a host closes the agent (from another
// goroutine, with context.Background) while a Run's first tool call
// runs; the Run's second call then works for longer than CancelGrace.
// Only a handler running when Close began may have called it: with the
// first call quick, Close waits for the second and returns once the Run
// has ended. With the first call the long one, Close cannot tell it from
// a handler that called it: it returns nil after CancelGrace, before
// the handler has returned, and the agent finishes closing once it has.
func TestClose_HostDuringToolCalls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		firstLong bool
	}{{"second call long", false}, {"first call long", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeDuringToolCalls(t, tc.firstLong) })
		})
	}
}

func closeDuringToolCalls(t *testing.T, firstLong bool) {
	const grace = time.Second
	rt := actorstest.NewRuntime(t, nil)
	started, proceed := make(chan struct{}), make(chan struct{})
	var long atomic.Bool // the long call's handler has returned
	work := func(name string, isLong bool, gate bool) *tools.Tool {
		return tools.MustNew(tools.Definition{Name: name, Timeout: tools.NoTimeout,
			Handler: func(context.Context, json.RawMessage) (any, error) {
				if gate {
					close(started)
					<-proceed
				}
				if isLong {
					time.Sleep(3 * grace) // the tool's own work, in the bubble's time
					long.Store(true)
				}
				return map[string]string{"done": name}, nil
			}})
	}
	a, err := agent.New(rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "first", `{}`)}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("c2", "second", `{}`)}},
		scripted.Turn{Text: "Both done."},
	), &agent.Options{Name: "host", CancelGrace: grace,
		Tools: []*tools.Tool{work("first", firstLong, true), work("second", !firstLong, false)}})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() {
		ans, err := a.Run(context.Background(), "s", ask)
		if err == nil && ans.Text != "Both done." {
			err = errors.New("answer " + ans.Text)
		}
		ran <- err
	}()
	<-started
	closed := closeOf(context.Background(), a)
	synctest.Wait() // Close waits, the first call running
	close(proceed)
	if err := <-closed; err != nil {
		t.Fatalf("the host's Close: %v", err)
	}
	switch returned := long.Load(); {
	case !firstLong && !returned:
		t.Error("Close returned while a handler that began after it still ran: it waits for those")
	case firstLong && returned:
		t.Error("Close waited for a handler running since before it for longer than CancelGrace")
	}
	if err := <-ran; err != nil {
		t.Errorf("the Run: %v, want its answer", err)
	}
	synctest.Wait() // the close finishes once the Run has returned
	if _, err := a.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Errorf("Close again: %v", err)
	}
}
