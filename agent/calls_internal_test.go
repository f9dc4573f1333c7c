package agent

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestCalls_NoEntryLeft: the agent's table of the handlers its calls run
// (Agent.calls) holds each from its start to its return, and nothing
// once they have returned: a handler that panics, one that outlives its
// call's timeout (its entry kept until it returns, after the call was
// answered), and one that returns, each counted once.
func TestCalls_NoEntryLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		release := make(chan struct{})
		tool := func(name string, timeout time.Duration, h func() (any, error)) *tools.Tool {
			return tools.MustNew(tools.Definition{Name: name, Timeout: timeout,
				Handler: func(context.Context, json.RawMessage) (any, error) { return h() }})
		}
		m, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{
				{ID: "c1", Name: "boom", Arguments: `{}`},
				{ID: "c2", Name: "slow", Arguments: `{}`},
				{ID: "c3", Name: "quick", Arguments: `{}`},
			}},
			{Text: "Done."},
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(rt, m.Spec("model"), &Options{Name: "calls", Tools: []*tools.Tool{
			tool("boom", 0, func() (any, error) { panic("boom") }),
			tool("slow", time.Second, func() (any, error) { <-release; return nil, nil }), // ignores its ctx
			tool("quick", 0, func() (any, error) { return nil, nil }),
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := a.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		ans, err := a.Run(context.Background(), "s", []models.Message{models.UserMessage("Go.")})
		if err != nil || ans.Text != "Done." || ans.FailedCalls() != 2 {
			t.Fatalf("Run: %+v, %v; want its answer, the panic and the timeout failed calls", ans, err)
		}
		synctest.Wait()
		a.mu.Lock()
		running, seq := len(a.calls), a.callSeq
		a.mu.Unlock()
		if running != 1 || seq != 3 {
			t.Errorf("after the Run: %d handler(s) in the table of %d begun, want the slow one of 3", running, seq)
		}
		close(release)
		synctest.Wait()
		a.mu.Lock()
		running, seq = len(a.calls), a.callSeq
		a.mu.Unlock()
		if running != 0 || seq != 3 {
			t.Errorf("once every handler returned: %d handler(s) in the table of %d begun, want none of 3", running, seq)
		}
	})
}
