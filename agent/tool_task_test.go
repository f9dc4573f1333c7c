package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestAsTool_BlankTask: a call of an agent's tool with the default schema
// whose "task" is empty or blank is refused as invalid arguments, the
// model told why: the sub-agent is not asked (an empty user message
// would ask it nothing), and the lead goes on to its answer.
func TestAsTool_BlankTask(t *testing.T) {
	for _, task := range []string{"", " \n\t"} {
		t.Run(fmt.Sprintf("%q", task), func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			wm := scripted.MustNew(scripted.Script{Turns: []scripted.Turn{{Text: "Written."}}}, nil)
			writer := newAgent(t, rt, wm.Spec("model"), &agent.Options{Name: "writer"})
			tool, err := agent.AsTool(writer, nil)
			if err != nil {
				t.Fatal(err)
			}
			args := fmt.Sprintf(`{"task":%q}`, task)
			lead := newAgent(t, rt, model(t,
				scripted.Turn{ToolCalls: []scripted.ToolCall{call("d1", "writer", args)}},
				scripted.Turn{Text: "No task given."},
			), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}})
			ans, err := lead.Run(context.Background(), "s", ask)
			if err != nil {
				t.Fatal(err)
			}
			res := onlyResult(t, ans)
			if !res.IsError || res.FailureKind != string(tools.FailureInvalidArguments) || !strings.Contains(string(res.Content), "task") {
				t.Errorf("the call with task %q: %s (error %v, kind %q), want an invalid-arguments error naming the task", task, res.Content, res.IsError, res.FailureKind)
			}
			if n := len(wm.Requests()); n != 0 {
				t.Errorf("the writer was asked %d times, want none", n)
			}
		})
	}
}
