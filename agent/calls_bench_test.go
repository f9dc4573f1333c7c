package agent_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// BenchmarkParallelToolCalls: many Runs of one agent at once (b.RunParallel,
// each its own session), each making four quick tool calls in one round
// before it answers: what the agent's work around every call (its
// handlers kept for Close, see tools.RouterOptions.OnCall) costs when the
// calls of many conversations contend for the agent.
func BenchmarkParallelToolCalls(b *testing.B) {
	rt := actorstest.NewRuntime(b, nil)
	quick := tools.MustNew(tools.Definition{Name: "quick",
		Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{call("c1", "quick", `{}`), call("c2", "quick", `{}`),
			call("c3", "quick", `{}`), call("c4", "quick", `{}`)}},
		{Text: "Done."},
	}}, &scripted.Options{MaxRecorded: -1})
	a, err := agent.New(rt, m.Spec("model"), &agent.Options{Name: "parallel", Tools: []*tools.Tool{quick}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close(context.Background())
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ans, err := a.Run(context.Background(), "s"+strconv.FormatInt(n.Add(1), 10), ask)
			if err != nil {
				b.Error(err)
				return
			}
			if ans.ToolCalls() != 4 {
				b.Errorf("%d calls, want 4", ans.ToolCalls())
				return
			}
		}
	})
}
