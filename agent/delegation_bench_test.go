package agent_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// BenchmarkDelegation: a lead's Run that delegates one task to a writer
// (agent.AsTool), whose conversation answers at once, with and without a
// ToolOptions.OnEvent hook: the cost of a delegation, the marks the
// agents keep of the calls their conversations wait for included.
func BenchmarkDelegation(b *testing.B) {
	for _, hook := range []bool{false, true} {
		name := "plain"
		if hook {
			name = "on-event"
		}
		b.Run(name, func(b *testing.B) {
			rt := actorstest.NewRuntime(b, nil)
			script := func(turns ...scripted.Turn) *scripted.Model {
				return scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: turns},
					&scripted.Options{MaxRecorded: -1})
			}
			writer, err := agent.New(rt, script(scripted.Turn{Text: "Written."}).Spec("model"), &agent.Options{Name: "writer"})
			if err != nil {
				b.Fatal(err)
			}
			defer writer.Close(context.Background())
			var opts *agent.ToolOptions
			if hook {
				opts = &agent.ToolOptions{OnEvent: func(string, agent.Event) {}}
			}
			tool, err := agent.AsTool(writer, opts)
			if err != nil {
				b.Fatal(err)
			}
			lead, err := agent.New(rt, script(leadTurns()...).Spec("model"), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}})
			if err != nil {
				b.Fatal(err)
			}
			defer lead.Close(context.Background())
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				ans, err := lead.Run(ctx, "s"+strconv.Itoa(i), ask)
				if err != nil {
					b.Fatal(err)
				}
				if ans.ToolCalls() != 1 {
					b.Fatalf("the lead made %d calls, want its one delegation", ans.ToolCalls())
				}
			}
		})
	}
}
