package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestClose_InsideStreamBody: a host closes its agent from the loop body
// of a Stream, on the tool call it gets (the call then blocks until
// cancelled), Close's ctx without deadline: Close returns nil (it does not
// wait for the Run whose body called it, which it cancels once that body
// has not returned for CancelGrace), the Stream
// then ends with ErrClosed, the call cancelled if it had started, and a
// later Run is refused with ErrClosed. With a Store, the agent's name is
// given back once that Run has returned: a new agent of the name opens.
func TestClose_InsideStreamBody(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeInsideStreamBody(t, durable) })
		})
	}
}

func closeInsideStreamBody(t *testing.T, durable bool) {
	rt := actorstest.NewRuntime(t, nil)
	started, cancelled := make(chan string, 1), make(chan string, 1)
	spec := model(t,
		scripted.Turn{Text: "Waiting.", ToolCalls: []scripted.ToolCall{call("c1", "wait", `{}`)}},
		scripted.Turn{Text: "unreachable"},
	)
	opts := &agent.Options{Name: "closer", Tools: []*tools.Tool{blocker(started, cancelled)}}
	if durable {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		opts.Store = store
	}
	a := newAgent(t, rt, spec, opts)
	// Close's ctx ends only when the test gives up on it: before the
	// fix, nothing else could end that wait.
	closeCtx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	type result struct{ closeErr, streamErr error }
	done := make(chan result, 1)
	go func() {
		var r result
		closed := false
		for ev, err := range a.Stream(context.Background(), "s", ask) {
			if err != nil {
				r.streamErr = err
			}
			if ev.Kind == agent.EventToolCall && !closed {
				closed = true
				r.closeErr = a.Close(closeCtx)
			}
		}
		done <- r
	}()
	var r result
	select {
	case r = <-done: // CancelGrace after Close began, in the bubble's time
	case <-time.After(time.Hour): // the bubble's time: long past CancelGrace
		t.Error("Close called in a Stream's loop body has not returned: it waits for that very Run")
		giveUp()
		r = <-done
	}
	if r.closeErr != nil {
		t.Errorf("Close in the loop body: %v, want nil", r.closeErr)
	}
	if !errors.Is(r.streamErr, agent.ErrClosed) {
		t.Errorf("the Stream whose body closed the agent ended with %v, want ErrClosed", r.streamErr)
	} else if msg := r.streamErr.Error(); !strings.Contains(msg, `agent "closer"`) || !strings.Contains(msg, `session "s"`) {
		t.Errorf("the Stream's error %q does not say which agent and session were closed", msg)
	}
	select {
	case <-started: // the call had started before Close stopped the loop
		<-cancelled
	default:
	}
	if _, err := a.Run(context.Background(), "s2", ask); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if durable {
		synctest.Wait() // the loop the Run left stopping is gone
		if a2, err := agent.New(rt, spec, opts); err != nil {
			t.Errorf("New of the name once the Run that closed the agent returned: %v", err)
		} else if err := a2.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestClose_CancelsDelegations: a lead delegates to a writer whose tool
// never returns (it does not even look at its ctx), and the lead's call
// has no timeout. The writer's Close does not wait for that delegation,
// which no host can cancel: it cancels it (the writer's loop answers the
// hung call as cancelled), waits for it to return, and returns nil. The
// lead's call gets an error result saying the writer was closed, and the
// lead's Run goes on to its answer, while the tool's goroutine still
// hangs: nothing of the delegation waits for it.
func TestClose_CancelsDelegations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		started, release := make(chan struct{}, 1), make(chan struct{})
		defer close(release)
		hang := tools.MustNew(tools.Definition{Name: "wait", Timeout: tools.NoTimeout,
			Handler: func(context.Context, json.RawMessage) (any, error) {
				started <- struct{}{}
				<-release
				return nil, nil
			}})
		writer, err := agent.New(rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "wait", `{}`)}},
			scripted.Turn{Text: "unreachable"},
		), &agent.Options{Name: "writer", Tools: []*tools.Tool{hang}})
		if err != nil {
			t.Fatal(err)
		}
		lead := delegatingLead(t, rt, writer, &agent.ToolOptions{Timeout: tools.NoTimeout})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type result struct {
			ans *models.Answer
			err error
		}
		ran := make(chan result, 1)
		go func() {
			ans, err := lead.Run(ctx, "s", []models.Message{models.UserMessage("Go.")})
			ran <- result{ans, err}
		}()
		<-started
		closeCtx, giveUp := context.WithCancel(context.Background())
		defer giveUp()
		closed := closeOf(closeCtx, writer)
		synctest.Wait()
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("the writer's Close during a delegation: %v, want nil", err)
			}
		default:
			t.Error("the writer's Close waits for a delegation that no host can cancel")
			cancel()
			giveUp()
			<-closed
		}
		r := <-ran
		if r.err != nil {
			t.Fatalf("the lead's Run: %v", r.err)
		}
		if res := onlyResult(t, r.ans); !res.IsError || !strings.Contains(string(res.Content), "closed") ||
			r.ans.Text != "The team is done." {
			t.Fatalf("the delegation's result %s (error %v), answer %q: want an error result saying the writer closed",
				res.Content, res.IsError, r.ans.Text)
		}
		synctest.Wait()
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, fn := range []string{"agent.(*Agent).run(", "agent.AsTool.func"} {
			if strings.Contains(stacks, fn) {
				t.Errorf("a goroutine in %s is left once the writer closed and the lead answered:\n%s", fn, stacks)
			}
		}
	})
}

// TestClose_FromAnotherGoroutineWaitsForStream: a host closes its agent
// from another goroutine (Close's ctx without deadline) while the
// consumer of a Stream handles an event, the conversation not over (its
// tool works until that consumer is done with the event). A consumer
// that takes less than CancelGrace is waited for, as a Run is: the
// Stream ends with its answer, and Close returns nil. Close tells such a
// consumer from a loop body that called Close (which never leaves) only
// by time: one that stays in one event's body longer than CancelGrace
// while Close waits is cancelled, and its Stream ends with ErrClosed.
func TestClose_FromAnotherGoroutineWaitsForStream(t *testing.T) {
	const grace = time.Second
	for _, tc := range []struct {
		hold time.Duration // the consumer's time on its first event, once Close began
		want error
	}{{0, nil}, {grace / 2, nil}, {2 * grace, agent.ErrClosed}} {
		t.Run(fmt.Sprint(tc.hold), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { closeFromAnotherGoroutine(t, grace, tc.hold, tc.want) })
		})
	}
}

func closeFromAnotherGoroutine(t *testing.T, grace, hold time.Duration, want error) {
	rt := actorstest.NewRuntime(t, nil)
	inBody, closing, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	work := tools.MustNew(tools.Definition{Name: "work", Timeout: tools.NoTimeout,
		Handler: func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-release:
				return map[string]string{"done": "yes"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}})
	a, err := agent.New(rt, model(t,
		scripted.Turn{Text: "Working.", ToolCalls: []scripted.ToolCall{call("c1", "work", `{}`)}},
		scripted.Turn{Text: "Done."},
	), &agent.Options{Name: "graceful", Tools: []*tools.Tool{work}, CancelGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	streamErr := make(chan error, 1)
	go func() {
		var last error
		first := true
		for _, err := range a.Stream(context.Background(), "s", ask) {
			if first { // the host's consumer handles its first event slowly
				first = false
				close(inBody)
				<-closing
				time.Sleep(hold) // the consumer's own work, in the bubble's time
				close(release)
			}
			last = err
		}
		streamErr <- last
	}()
	<-inBody
	closeErr := make(chan error, 1)
	go func() { closeErr <- a.Close(context.Background()) }() // the host shuts down gracefully
	synctest.Wait()
	close(closing)
	if err := <-streamErr; !errors.Is(err, want) || (want == nil && err != nil) {
		t.Errorf("Stream closed by another goroutine, its consumer %v on an event: %v, want %v", hold, err, want)
	}
	if err := <-closeErr; err != nil {
		t.Errorf("Close: %v", err)
	}
}
