package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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
// a handler that called it: after CancelGrace it returns an error
// wrapping ErrCloseContinues that says what still runs (it is not
// closed yet), before the handler has returned; a Close meanwhile says
// so again, the agent finishes closing once the handler has returned,
// and a Close then returns nil.
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
	err = <-closed
	switch returned := long.Load(); {
	case !firstLong && err != nil:
		t.Fatalf("the host's Close: %v", err)
	case !firstLong && !returned:
		t.Error("Close returned while a handler that began after it still ran: it waits for those")
	case firstLong && returned:
		t.Error("Close waited for a handler running since before it for longer than CancelGrace")
	case firstLong && (!errors.Is(err, agent.ErrCloseContinues) || !strings.Contains(err.Error(), "1 conversation")):
		t.Errorf("the host's Close before the handler returned: %v, want ErrCloseContinues saying a conversation still runs", err)
	case firstLong:
		if err := a.Close(context.Background()); !errors.Is(err, agent.ErrCloseContinues) || long.Load() {
			t.Errorf("Close again while the handler runs: %v (handler returned: %v), want ErrCloseContinues before it returned", err, long.Load())
		}
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

// TestClose_HostPastAnAbandonedHandler: a Run's first call times out,
// its handler ignoring its ctx and running on; the Run goes on to a
// second call, running when a host closes the agent, and a third, which
// begins after Close and works for longer than CancelGrace. The handler
// of the timed-out call was running before Close began, but the Run no
// longer waits for it: Close waits for the Run and returns nil once it
// has ended, not ErrCloseContinues after CancelGrace.
func TestClose_HostPastAnAbandonedHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = time.Second
		rt := actorstest.NewRuntime(t, nil)
		started, proceed, abandoned := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var third atomic.Bool // the third call's handler has returned
		tool := func(name string, timeout time.Duration, h func()) *tools.Tool {
			return tools.MustNew(tools.Definition{Name: name, Timeout: timeout,
				Handler: func(context.Context, json.RawMessage) (any, error) { h(); return nil, nil }})
		}
		a, err := agent.New(rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "stuck", `{}`)}},
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c2", "gate", `{}`)}},
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c3", "long", `{}`)}},
			scripted.Turn{Text: "All done."},
		), &agent.Options{Name: "abandoned", CancelGrace: grace, Tools: []*tools.Tool{
			tool("stuck", grace, func() { <-abandoned }), // ignores its ctx: runs on past its timeout
			tool("gate", tools.NoTimeout, func() { close(started); <-proceed }),
			tool("long", tools.NoTimeout, func() { time.Sleep(3 * grace); third.Store(true) }),
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer close(abandoned) // the abandoned handler returns once the test is done
		ran := make(chan error, 1)
		go func() {
			_, err := a.Run(context.Background(), "s", ask)
			ran <- err
		}()
		<-started
		closed := closeOf(context.Background(), a)
		synctest.Wait() // Close waits, the second call running
		close(proceed)
		if err := <-closed; err != nil {
			t.Errorf("the host's Close: %v, want nil once the Run has ended", err)
		}
		if !third.Load() {
			t.Error("Close returned before the Run's last call had returned")
		}
		if err := <-ran; err != nil {
			t.Errorf("the Run: %v", err)
		}
	})
}
