package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/approval"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// lead returns a lead agent's script: delegate to "writer", then answer.
func leadTurns() []scripted.Turn {
	return []scripted.Turn{
		{Text: "Asking the writer.", ToolCalls: []scripted.ToolCall{call("d1", "writer", `{"task":"echo hi"}`)}},
		{Text: "The team is done."},
	}
}

// delegatingLead returns a lead agent on rt whose one tool delegates to
// sub (agent.AsTool with opts) and whose model calls it and then answers
// (leadTurns).
func delegatingLead(t *testing.T, rt *actors.Runtime, sub *agent.Agent, opts *agent.ToolOptions) *agent.Agent {
	t.Helper()
	tool, err := agent.AsTool(sub, opts)
	if err != nil {
		t.Fatal(err)
	}
	return newAgent(t, rt, model(t, leadTurns()...), &agent.Options{Name: "lead", Tools: []*tools.Tool{tool}})
}

// runLead runs lead in session on the user's text and returns its
// answer, failing t on an error.
func runLead(t *testing.T, lead *agent.Agent, session, text string) *models.Answer {
	t.Helper()
	ans, err := lead.Run(testCtx(t), session, []models.Message{models.UserMessage(text)})
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// onlyResult returns the single result of the answer's only round.
func onlyResult(t *testing.T, ans *models.Answer) models.ToolResult {
	t.Helper()
	if len(ans.Rounds) != 1 || len(ans.Rounds[0].Results) != 1 {
		t.Fatalf("rounds %+v: want one call with one result", ans.Rounds)
	}
	return ans.Rounds[0].Results[0]
}

// TestAsTool_Delegation: a lead agent delegates to a writer agent that
// uses a tool of its own; the lead gets the writer's answer as the
// call's result.
func TestAsTool_Delegation(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var calls atomic.Int64
	writer := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "I echoed hi."},
	), &agent.Options{Name: "writer", Tools: []*tools.Tool{echo(&calls)}})
	ans := runLead(t, delegatingLead(t, rt, writer, nil), "team", "Get hi echoed.")
	res := onlyResult(t, ans)
	var got struct {
		Success   bool   `json:"success"`
		Answer    string `json:"answer"`
		ToolCalls int    `json:"tool_calls"`
	}
	if err := json.Unmarshal(res.Content, &got); err != nil || !got.Success || got.Answer != "I echoed hi." || got.ToolCalls != 1 {
		t.Fatalf("delegation result %s (%v)", res.Content, err)
	}
	if ans.Text != "The team is done." || calls.Load() != 1 {
		t.Fatalf("lead answered %q; the writer's tool ran %d times", ans.Text, calls.Load())
	}
}

// TestAsTool_SubAgentPanics: a sub-agent whose loop panics at every
// attempt gives the lead's call exactly one error result; the lead goes
// on to its answer.
func TestAsTool_SubAgentPanics(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var crashes atomic.Int64
	crashing := actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_END {
			crashes.Add(1)
			panic("injected: the writer's model crashed")
		}
	})
	writer := newAgent(t, rt, crashing, &agent.Options{Name: "writer", MaxAttempts: 2})
	var last agent.Event // the delegation's last event: an EventError saying why it failed
	ans := runLead(t, delegatingLead(t, rt, writer, &agent.ToolOptions{OnEvent: func(_ string, ev agent.Event) { last = ev }}),
		"team", "Get hi echoed.")
	res := onlyResult(t, ans)
	if !res.IsError || !strings.Contains(string(res.Content), "writer agent failed") || ans.Text != "The team is done." || crashes.Load() != 2 {
		t.Fatalf("result %s, answer %q, %d crashes", res.Content, ans.Text, crashes.Load())
	}
	if last.Kind != agent.EventError || !strings.Contains(last.Text, "writer agent failed") || last.Answer == nil {
		t.Errorf("the delegation's last event is %v %q (answer %v), want the failure", last.Kind, last.Text, last.Answer)
	}
}

// TestAsTool_TimeoutAndCancel: a sub-agent whose tool blocks is cut off
// by the delegation's timeout (one error result, the sub-agent's tool
// cancelled); cancelling the lead's Run while a delegation runs cancels
// the sub-agent's tool call too. It runs in a synctest bubble: the
// delegation's timeout passes only once the sub-agent's tool has started
// and blocks, however slow the machine (on the real clock, a timeout
// that passed first left the test waiting for a start that never came).
func TestAsTool_TimeoutAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		started, cancelled := make(chan string, 2), make(chan string, 2)
		writer := newAgent(t, rt, model(t,
			scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "wait", `{}`)}},
			scripted.Turn{Text: "unreachable"},
		), &agent.Options{Name: "writer", Tools: []*tools.Tool{blocker(started, cancelled)}})

		// Timeout.
		lead := delegatingLead(t, rt, writer, &agent.ToolOptions{Timeout: 200 * time.Millisecond})
		ans := runLead(t, lead, "timeout", "Go.")
		if res := onlyResult(t, ans); !res.IsError || res.FailureKind != string(tools.FailureTimeout) || ans.Text != "The team is done." {
			t.Fatalf("result %+v, answer %q", res, ans.Text)
		}
		<-started
		<-cancelled

		// Cancel.
		lead2 := delegatingLead(t, rt, writer, &agent.ToolOptions{Name: "writer", Timeout: tools.NoTimeout})
		ctx, cancel := context.WithCancel(testCtx(t))
		go func() { <-started; cancel() }()
		ans, err := lead2.Run(ctx, "cancel", []models.Message{models.UserMessage("Go.")})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled lead: %v", err)
		}
		select {
		case <-cancelled:
		case <-testCtx(t).Done():
			t.Fatal("the sub-agent's tool call was not cancelled")
		}
		if res := onlyResult(t, ans); !res.IsError {
			t.Fatalf("cancelled delegation answered %+v", res)
		}
	})
}

// TestAsTool_UnderTheCallingTool: a delegation's loop is a child of the
// calling tool's actor in the lead's router: a crash of the writer's loop
// is decided by that actor's supervision, and the loop is gone once the
// call is answered.
func TestAsTool_UnderTheCallingTool(t *testing.T) {
	var mu sync.Mutex
	var events []supervisor.Event
	rt := actorstest.NewRuntime(t, &actors.RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	var crashed atomic.Bool
	writer := newAgent(t, rt, model(t,
		scripted.Turn{ToolCalls: []scripted.ToolCall{call("w1", "echo", `{"text":"hi"}`)}},
		scripted.Turn{Text: "I echoed hi."},
	), &agent.Options{Name: "writer", Tools: []*tools.Tool{echo(nil)}, OnToolResult: func(tools.ToolResultEvent) {
		if crashed.CompareAndSwap(false, true) {
			panic("injected: the writer's loop crashed")
		}
	}})
	ans := runLead(t, delegatingLead(t, rt, writer, nil), "team", "Get hi echoed.")
	if res := onlyResult(t, ans); res.IsError || ans.Text != "The team is done." {
		t.Fatalf("result %s, answer %q: want the writer healed", res.Content, ans.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	const caller = "polyweave/lead/tool-writer"
	var restarted string
	for _, ev := range events {
		if ev.Directive == supervisor.Restart && strings.Contains(fmt.Sprint(ev.Reason), "the writer's loop crashed") {
			if ev.Supervisor != caller {
				t.Fatalf("the writer's loop %s was restarted by %s, want the calling tool %s", ev.Child, ev.Supervisor, caller)
			}
			restarted = ev.Child
		}
	}
	if !strings.HasPrefix(restarted, caller+"/writer") {
		t.Fatalf("no restart of the writer's loop under %s: %+v", caller, events)
	}
	if _, ok := rt.System().ProcessRegistry.GetLocal(restarted); ok {
		t.Fatalf("the delegation's loop %s outlived the call", restarted)
	}
}

// TestAsTool_FlagsFromTheAgentsTools: a delegation is described by what
// its agent's tools may do, so approval.Default runs a delegation to a
// reader and asks before one to an agent that can run commands; a host's
// Flags override the derived ones.
func TestAsTool_FlagsFromTheAgentsTools(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	read := tools.MustNew(tools.Definition{Name: "read_file", Capabilities: []string{"read"}, Idempotent: true})
	write := tools.MustNew(tools.Definition{Name: "write_file", Capabilities: []string{"write"}, Idempotent: true})
	run := tools.MustNew(tools.Definition{Name: "run_command", Capabilities: []string{"execute"}, Irreversible: true,
		DiesWithProcess: true})
	delegation := func(name string, o *agent.ToolOptions, ts ...*tools.Tool) tools.Description {
		t.Helper()
		sub := newAgent(t, rt, model(t, scripted.Turn{Text: "done"}), &agent.Options{Name: name, Tools: ts})
		tool, err := agent.AsTool(sub, o)
		if err != nil {
			t.Fatal(err)
		}
		return tool.Description()
	}
	policy := approval.Default()
	verdict := func(d tools.Description) tools.Verdict {
		v, _ := policy(tools.ApprovalCall{ToolCallID: "c1", Tool: d, Arguments: json.RawMessage(`{"task":"x"}`)})
		return v
	}

	reader := delegation("reader", nil, read)
	call := tools.ApprovalCall{Tool: reader}
	if !call.ReadOnly() || !reader.Reversible || !reader.Idempotent || verdict(reader) != tools.VerdictRun {
		t.Errorf("reader's delegation %+v: want read-only, reversible, idempotent, run by approval.Default", reader)
	}
	if bare := delegation("bare", nil); !slices.Equal(bare.Capabilities, []string{"read"}) || !bare.Reversible {
		t.Errorf("a tool-less agent's delegation %+v: want read-only", bare)
	}

	editor := delegation("editor", nil, read, write)
	if !slices.Equal(editor.Capabilities, []string{"delegate", "read", "write"}) || !editor.Reversible ||
		editor.Idempotent || verdict(editor) != tools.VerdictRun {
		t.Errorf("editor's delegation %+v: want delegate+read+write, reversible, not idempotent", editor)
	}

	writer := delegation("writer", nil, read, write, run)
	call = tools.ApprovalCall{Tool: writer}
	if call.ReadOnly() || writer.Reversible || writer.Idempotent || verdict(writer) != tools.VerdictAsk {
		t.Errorf("writer's delegation %+v: want irreversible, asked about by approval.Default", writer)
	}
	if !slices.Equal(writer.Capabilities, []string{"delegate", "read", "write", "execute"}) {
		t.Errorf("writer's capabilities %v", writer.Capabilities)
	}

	// A host whose writer only touches a throw-away sandbox says so;
	// its Flags leave the capabilities derived when they set none.
	sandboxed := delegation("sandboxed", &agent.ToolOptions{Flags: &agent.ToolFlags{Idempotent: true}}, read, run)
	if !sandboxed.Reversible || !sandboxed.Idempotent || verdict(sandboxed) != tools.VerdictRun ||
		!slices.Equal(sandboxed.Capabilities, []string{"delegate", "read", "execute"}) {
		t.Errorf("overridden delegation %+v: want reversible, idempotent, derived capabilities", sandboxed)
	}
}
