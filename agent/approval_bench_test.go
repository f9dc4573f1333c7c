package agent_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/approval"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// BenchmarkApprovalPolicy: a conversation with one tool round, without
// approval (the baseline) and with a policy that lets the call run (the
// cost of asking the policy per call).
func BenchmarkApprovalPolicy(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts *tools.ApprovalOptions
	}{
		{"none", nil},
		{"policy-runs", &tools.ApprovalOptions{Policy: approval.RunAll()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt := actorstest.NewRuntime(b, nil)
			m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{call("c1", "echo", `{"text":"hi"}`)}},
				{Text: "Done."},
			}}, &scripted.Options{MaxRecorded: -1})
			a, err := agent.New(rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil)}, Approval: bc.opts})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close(context.Background())
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := a.Run(ctx, "s"+strconv.Itoa(i), ask); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
