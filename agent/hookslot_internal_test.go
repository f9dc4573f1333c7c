package agent

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestHookSlots_NoneLeft: a delegation's OnEvent hook is kept by each
// agent up the chain while the delegation's handler runs, and by none once
// it has returned: after many Runs of a lead that delegates to a middle
// agent, which delegates to a writer, both delegations with a hook, the
// lead and the middle agent keep no hook and count no delegation, while
// within a hook the lead kept at most the two of that Run (and the
// bubble, no goroutine).
func TestHookSlots_NoneLeft(t *testing.T) {
	synctest.Test(t, hookSlotsNoneLeft)
}

func hookSlotsNoneLeft(t *testing.T) {
	runs := 10000
	if testing.Short() {
		runs = 500
	}
	rt := actorstest.NewRuntime(t, nil)
	script := func(turns ...scripted.Turn) actors.Spec {
		return scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: turns},
			&scripted.Options{MaxRecorded: -1}).Spec("model")
	}
	var lead, mid *Agent
	mostKept := 0
	hook := func(string, Event) {
		lead.mu.Lock()
		mostKept = max(mostKept, len(lead.hooks))
		lead.mu.Unlock()
	}
	newAgent := func(name string, spec actors.Spec, ts ...*tools.Tool) *Agent {
		a, err := New(rt, spec, &Options{Name: name, Tools: ts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := a.Close(context.Background()); err != nil {
				t.Errorf("close %s: %v", name, err)
			}
		})
		return a
	}
	asTool := func(a *Agent) *tools.Tool {
		tool, err := AsTool(a, &ToolOptions{OnEvent: hook})
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	writer := newAgent("writer", script(scripted.Turn{Text: "Written."}))
	mid = newAgent("mid", script(
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "m1", Name: "writer", Arguments: `{"task":"write"}`}}},
		scripted.Turn{Text: "Passed on."}), asTool(writer))
	lead = newAgent("lead", script(
		scripted.Turn{ToolCalls: []scripted.ToolCall{{ID: "l1", Name: "mid", Arguments: `{"task":"pass on"}`}}},
		scripted.Turn{Text: "Done."}), asTool(mid))
	for i := range runs {
		ans, err := lead.Run(context.Background(), "s"+strconv.Itoa(i), []models.Message{models.UserMessage("Go.")})
		if err != nil || ans.Text != "Done." {
			t.Fatalf("Run %d: %+v, %v", i, ans, err)
		}
	}
	if mostKept == 0 || mostKept > 2 {
		t.Errorf("within a hook the lead kept up to %d hooks, want those of the Run's two delegations", mostKept)
	}
	for _, a := range []*Agent{lead, mid, writer} {
		a.mu.Lock()
		hooks, delegating := len(a.hooks), a.delegating
		a.mu.Unlock()
		if hooks != 0 || delegating != 0 {
			t.Errorf("after %d Runs %s keeps %d hooks and counts %d delegations, want none", runs, a.opts.Name, hooks, delegating)
		}
	}
}
