package agent_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestAsTool_DurableSubAgentAfterRestart: a sub-agent with a Store keeps
// its delegated conversations there. After the host starts again (a new
// Agent of the same name on the same store, as a new process would
// make), a delegation of another task must get a conversation of its
// own, not the one the first process stored under the same session id
// (which was refused as a conflict, failing the call) nor its answer.
func TestAsTool_DurableSubAgentAfterRestart(t *testing.T) {
	store := memstore.New(nil)
	defer store.Close()
	delegate := func(task string) string {
		rt := actorstest.NewRuntime(t, nil)
		writer, err := agent.New(rt, model(t, scripted.Turn{Text: "Done: " + task}),
			&agent.Options{Name: "writer", Store: store})
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Close(testCtx(t))
		tool, err := agent.AsTool(writer, nil)
		if err != nil {
			t.Fatal(err)
		}
		lead, err := agent.New(rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("d1", "writer", fmt.Sprintf(`{"task":%q}`, task))}},
			scripted.Turn{Text: "The team is done."},
		), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}})
		if err != nil {
			t.Fatal(err)
		}
		defer lead.Close(testCtx(t))
		ans, err := lead.Run(testCtx(t), "team", []models.Message{models.UserMessage("Delegate " + task + ".")})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Success bool   `json:"success"`
			Answer  string `json:"answer"`
		}
		if err := json.Unmarshal(onlyResult(t, ans).Content, &got); err != nil || !got.Success {
			t.Fatalf("delegating %q: result %s (%v)", task, onlyResult(t, ans).Content, err)
		}
		return got.Answer
	}
	if got := delegate("first task"); got != "Done: first task" {
		t.Fatalf("first process: %q", got)
	}
	if got := delegate("second task"); got != "Done: second task" {
		t.Fatalf("second process: the writer answered %q", got)
	}
}
