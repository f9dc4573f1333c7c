package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/approval"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// launch is an irreversible tool: it records the targets it launched.
type launcher struct {
	runs    atomic.Int64
	targets chan string
}

func newLauncher() *launcher { return &launcher{targets: make(chan string, 16)} }

func (l *launcher) tool() *tools.Tool {
	return tools.MustNewTyped(tools.Definition{Name: "launch", Capabilities: []string{"execute"}, Irreversible: true},
		func(_ context.Context, in struct {
			Target string `json:"target"`
		}) (map[string]string, error) {
			l.runs.Add(1)
			l.targets <- in.Target
			return map[string]string{"launched": in.Target}, nil
		})
}

// approvalScript: one round with a reversible echo and an irreversible
// launch, then the final answer.
func approvalScript(t *testing.T) *scripted.Model {
	t.Helper()
	return scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{Text: "Echo and launch.", ToolCalls: []scripted.ToolCall{
			call("c1", "echo", `{"text":"hi"}`), call("c2", "launch", `{"target":"moon"}`)}},
		{Text: "Done."},
	}}, nil)
}

func resultOf(t *testing.T, ans *models.Answer, id string) models.ToolResult {
	t.Helper()
	for _, r := range ans.Rounds {
		for _, res := range r.Results {
			if res.CallID == id {
				return res
			}
		}
	}
	t.Fatalf("no result for %s in %+v", id, ans.Rounds)
	return models.ToolResult{}
}

func waiting(t *testing.T, err error, ids ...string) *agent.WaitingError {
	t.Helper()
	var w *agent.WaitingError
	if !errors.As(err, &w) {
		t.Fatalf("want a WaitingError, got %v", err)
	}
	got := make([]string, len(w.Pending))
	for i, p := range w.Pending {
		got[i] = p.ToolCallID
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("pending %v, want %v", got, ids)
	}
	return w
}

// TestApproval_AskThenApprove: the irreversible call waits, the other
// call of its round runs meanwhile, Run says what waits, and Resume with
// an approval runs it once and goes on to the final answer.
func TestApproval_AskThenApprove(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	var echoes atomic.Int64
	l := newLauncher()
	m := approvalScript(t)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(&echoes), l.tool()},
		Approval: &tools.ApprovalOptions{}})
	ans, err := a.Run(testCtx(t), "s1", ask)
	w := waiting(t, err, "c2")
	if p := w.Pending[0]; p.Tool != "launch" || string(p.Arguments) != `{"target":"moon"}` || !strings.Contains(p.Reason, "irreversible") {
		t.Fatalf("pending %+v", p)
	}
	if echoes.Load() != 1 || l.runs.Load() != 0 || ans.Answered {
		t.Fatalf("before the answer: %d echoes, %d launches, answer %+v", echoes.Load(), l.runs.Load(), ans)
	}
	if _, err := a.Run(testCtx(t), "s1", ask); !errors.Is(err, agent.ErrWaiting) {
		t.Fatalf("a Run of a waiting session: %v", err)
	}
	ans, err = a.Resume(testCtx(t), "s1", ask, agent.Approve("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Done." || l.runs.Load() != 1 || echoes.Load() != 1 {
		t.Fatalf("answer %q, %d launches, %d echoes", ans.Text, l.runs.Load(), echoes.Load())
	}
	if r := resultOf(t, ans, "c2"); r.IsError || string(r.Content) != `{"launched":"moon"}` {
		t.Fatalf("launch result %+v", r)
	}
	if r := resultOf(t, ans, "c1"); r.IsError {
		t.Fatalf("echo result %+v", r)
	}
	if _, err := a.Resume(testCtx(t), "s1", ask, agent.Approve("c2")); !errors.Is(err, agent.ErrNotWaiting) {
		t.Fatalf("a second Resume: %v", err)
	}
}

// TestApproval_DenyAndEdit: a person's denial is the call's one result
// with the message, and the model goes on; an edit runs the call with the
// edited arguments.
func TestApproval_DenyAndEdit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision tools.ApprovalAnswer
		runs     int64
		want     string // in the result
		isError  bool
	}{
		{"deny", agent.Deny("c2", "not today"), 0, "not today", true},
		{"edit", agent.Edit("c2", json.RawMessage(`{"target":"mars"}`)), 1, `{"launched":"mars"}`, false},
		{"edit invalid", agent.Edit("c2", json.RawMessage(`{"target":7}`)), 0, "arguments a person edited are invalid", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			l := newLauncher()
			m := approvalScript(t)
			a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()},
				Approval: &tools.ApprovalOptions{}})
			_, err := a.Run(testCtx(t), "s1", ask)
			waiting(t, err, "c2")
			ans, err := a.Resume(testCtx(t), "s1", ask, tc.decision)
			if err != nil {
				t.Fatal(err)
			}
			r := resultOf(t, ans, "c2")
			if ans.Text != "Done." || l.runs.Load() != tc.runs || r.IsError != tc.isError || !strings.Contains(string(r.Content), tc.want) {
				t.Fatalf("answer %q, %d launches, result %+v", ans.Text, l.runs.Load(), r)
			}
			if tc.isError && r.FailureKind != string(tools.FailureDenied) {
				t.Fatalf("failure kind %q", r.FailureKind)
			}
		})
	}
}

// TestApproval_PolicyDenies: a call the policy denies is answered once,
// with the reason, and the model goes on: its follow-up carries it.
func TestApproval_PolicyDenies(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	m := approvalScript(t)
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{echo(nil), l.tool()},
		Approval: &tools.ApprovalOptions{Policy: approval.DenyIrreversible()}})
	ans, err := a.Run(testCtx(t), "s1", ask)
	if err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, ans, "c2")
	if ans.Text != "Done." || l.runs.Load() != 0 || !r.IsError || r.FailureKind != string(tools.FailureDenied) ||
		!strings.Contains(string(r.Content), "launch is irreversible") || ans.ToolCalls() != 2 {
		t.Fatalf("answer %+v, result %+v", ans, r)
	}
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Request
	raw, _ := last.Param(models.ParamMessages)
	if n := strings.Count(string(raw), "launch is irreversible"); n != 1 {
		t.Fatalf("the follow-up carries the denial %d times: %s", n, raw)
	}
}

// TestApproval_ThousandWaiting: sessions waiting for approval hold no
// goroutine each and little memory.
func TestApproval_ThousandWaiting(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	rt := actorstest.NewRuntime(t, nil)
	l := newLauncher()
	m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{call("c1", "launch", `{"target":"moon"}`)}},
		{Text: "Done."},
	}}, &scripted.Options{MaxRecorded: -1})
	a := newAgent(t, rt, m.Spec("model"), &agent.Options{Tools: []*tools.Tool{l.tool()},
		Approval: &tools.ApprovalOptions{}})
	ctx := testCtx(t)
	// Warm up, so that one-time allocations are not counted.
	if _, err := a.Run(ctx, "warm", ask); err == nil {
		t.Fatal("no wait")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	for i := range n {
		_, err := a.Run(ctx, "s"+strconv.Itoa(i), ask)
		waiting(t, err, "c1")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
	t.Logf("%d sessions waiting: %d bytes each, %d goroutines more", n, per, g1-g0)
	if per >= 64<<10 {
		t.Fatalf("%d bytes per waiting session", per)
	}
	if g1-g0 >= n/10 {
		t.Fatalf("%d goroutines more for %d waiting sessions", g1-g0, n)
	}
	if l.runs.Load() != 0 {
		t.Fatalf("%d launches", l.runs.Load())
	}
	// They all go on when approved.
	for i := range 3 {
		ans, err := a.Resume(ctx, "s"+strconv.Itoa(i), ask, agent.Approve("c1"))
		if err != nil || ans.Text != "Done." {
			t.Fatalf("resume %d: %v %+v", i, err, ans)
		}
	}
	if l.runs.Load() != 3 {
		t.Fatalf("%d launches", l.runs.Load())
	}
}

// TestApproval_HeldCallArgumentsAsWritten: the held calls a WaitingError
// shows a person carry their arguments byte for byte as the model wrote
// them (as their EventToolCall has them): not HTML-escaped, not
// compacted, at the first wait and at one after a Resume, on the shared
// loop and resuming a stored session.
func TestApproval_HeldCallArgumentsAsWritten(t *testing.T) {
	const args2, args3 = `{"target": "moon > f.txt && cat f.txt"}`, `{ "target":"<mars>" }`
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			rt := actorstest.NewRuntime(t, nil)
			m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
				{ToolCalls: []scripted.ToolCall{call("c2", "launch", args2), call("c3", "launch", args3)}},
				{Text: "Done."},
			}}, nil)
			opts := &agent.Options{Tools: []*tools.Tool{newLauncher().tool()}, Approval: &tools.ApprovalOptions{}}
			if durable {
				store := memstore.New(nil)
				t.Cleanup(func() { store.Close() })
				opts.Store = store
			}
			a := newAgent(t, rt, m.Spec("model"), opts)
			called := map[string]string{}
			var err error
			for ev, e := range a.Stream(testCtx(t), "s1", ask) {
				if ev.Kind == agent.EventToolCall {
					called[ev.Call.ID] = string(ev.Call.Arguments)
				}
				err = e
			}
			if called["c2"] != args2 || called["c3"] != args3 {
				t.Fatalf("EventToolCall arguments %q, want them as written", called)
			}
			w := waiting(t, err, "c2", "c3")
			if got2, got3 := string(w.Pending[0].Arguments), string(w.Pending[1].Arguments); got2 != args2 || got3 != args3 {
				t.Errorf("held for approval with arguments %s and %s, want them as the model wrote them: %s and %s", got2, got3, args2, args3)
			}
			_, err = a.Resume(testCtx(t), "s1", ask, agent.Approve("c2"))
			w = waiting(t, err, "c3")
			if got := string(w.Pending[0].Arguments); got != args3 {
				t.Errorf("still held after a Resume with arguments %s, want %s", got, args3)
			}
			_, err = a.Resume(testCtx(t), "s1", ask, agent.Approve("c9"))
			w = waiting(t, err, "c3")
			if got := string(w.Pending[0].Arguments); got != args3 {
				t.Errorf("still held after a Resume about no held call with arguments %s, want %s", got, args3)
			}
		})
	}
}
