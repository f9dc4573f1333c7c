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

// TestDone_AfterACloseThatContinues: a host's Close during a tool call
// that runs for longer than CancelGrace returns ErrCloseContinues before
// the call's handler has returned (see TestClose_HostDuringToolCalls).
// Done is not closed before any Close, nor then: it is closed once the
// close finished in the background, after the handler and the Run have
// returned, and a Close then returns nil.
func TestDone_AfterACloseThatContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = time.Second
		rt := actorstest.NewRuntime(t, nil)
		started := make(chan struct{})
		var returned atomic.Bool // the long handler has returned
		long := tools.MustNew(tools.Definition{Name: "long", Timeout: tools.NoTimeout,
			Handler: func(context.Context, json.RawMessage) (any, error) {
				close(started)
				time.Sleep(3 * grace) // the tool's own work, in the bubble's time
				returned.Store(true)
				return nil, nil
			}})
		a := newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "long", `{}`)}},
			scripted.Turn{Text: "Done."},
		), &agent.Options{Name: "done", CancelGrace: grace, Tools: []*tools.Tool{long}})
		if isClosed(a.Done()) {
			t.Fatal("Done closed before any Close")
		}
		ran := make(chan error, 1)
		go func() {
			_, err := a.Run(context.Background(), "s", ask)
			ran <- err
		}()
		<-started
		if err := a.Close(context.Background()); !errors.Is(err, agent.ErrCloseContinues) {
			t.Fatalf("the host's Close during the long call: %v, want ErrCloseContinues", err)
		}
		if isClosed(a.Done()) {
			t.Error("Done closed once Close returned ErrCloseContinues, the handler still running")
		}
		<-a.Done()
		if !returned.Load() {
			t.Error("Done closed before the handler returned")
		}
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("the Run: %v", err)
			}
		default:
			t.Error("Done closed before the Run returned")
		}
		if err := a.Close(context.Background()); err != nil {
			t.Errorf("Close once Done is closed: %v, want nil", err)
		}
	})
}

// TestDone_AfterClose: Done is closed once a Close has returned nil, also
// that of an agent whose loop never started; a nil Agent's is nil.
func TestDone_AfterClose(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := newAgent(t, rt, model(t, scripted.Turn{Text: "Hello."}), nil)
	done := a.Done()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isClosed(done) || !isClosed(a.Done()) {
		t.Error("Done not closed once Close returned nil")
	}
	var none *agent.Agent
	if none.Done() != nil {
		t.Error("a nil Agent's Done is not nil")
	}
}

// TestDone_AfterACloseByItsOwnTool: a tool of the agent closes it with its
// call's ctx: Close returns nil at once, though the close has not
// completed (the Run waits for the tool's result): Done is not closed
// then, and is once the agent has finished closing in the background,
// after the Run has returned.
func TestDone_AfterACloseByItsOwnTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		var a *agent.Agent
		closed, doneThen := make(chan error, 1), make(chan bool, 1)
		shutdown := tools.MustNew(tools.Definition{Name: "shutdown",
			Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
				closed <- a.Close(ctx)
				doneThen <- isClosed(a.Done())
				return nil, nil
			}})
		a = newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("c1", "shutdown", `{}`)}},
			scripted.Turn{Text: "Closed."},
		), &agent.Options{Name: "ownclose", Tools: []*tools.Tool{shutdown}})
		if _, err := a.Run(context.Background(), "s", ask); err != nil {
			t.Fatalf("the Run whose tool closed the agent: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close from the agent's own tool with its call's ctx: %v, want nil", err)
		}
		if <-doneThen {
			t.Error("Done closed as the tool's Close returned, the Run waiting for the tool")
		}
		<-a.Done()
	})
}

// isClosed tells whether done is closed now.
func isClosed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
