package inspect_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/inspect"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// teamRig is a lead agent delegating to a writer agent (agent.AsTool)
// whose "boom" tool panics on its first call, all seen by an inspector
// served over HTTP. The writer's model takes its second request (the
// crashed call's answer) once the crash's supervisor has told its
// decision: the tool answers its call before it fails, and a delegation
// that ended first would stop the tool before the decision, which the
// runtime then never tells (nor records the failure the stop reports),
// leaving nothing for the inspector to keep.
type teamRig struct {
	*rig
	lead *agent.Agent
}

// crashedTool is the path of the writer's tool actor in the lead's
// delegation: the delegation's loop runs under the lead's writer tool.
const crashedTool = "polyweave/lead/tool-writer/writer/tool-boom"

func newTeamRig(t *testing.T) *teamRig {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close) // first: ends the event streams
	r := &rig{rt: rt, in: in, srv: srv}
	decided, released := make(chan struct{}), make(chan struct{})
	var tell sync.Once
	// Watching after the inspector: it has seen the decision when
	// decided is closed.
	t.Cleanup(rt.WatchSupervision(func(ev supervisor.Event) {
		if ev.Child == crashedTool {
			tell.Do(func() { close(decided) })
		}
	}))
	var calls atomic.Int32
	boom := tools.MustNewTyped(tools.Definition{Name: "boom", Description: "panics the first time"},
		func(_ context.Context, in echoIn) (echoOut, error) {
			if calls.Add(1) == 1 {
				panic("boom went off")
			}
			return echoOut(in), nil
		})
	writerModel := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "w1", Name: "boom", Arguments: `{"x":1}`}}},
		{Text: "written, after a crash"},
	}}, nil).Spec("writer-model")
	writerModel.New = afterSecondRequest(writerModel.New, decided, released)
	writer, err := agent.New(rt, in.Model(writerModel), &agent.Options{Name: "writer", Tools: []*tools.Tool{boom},
		OnToolResult: in.OnToolResult})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close(context.Background()) })
	delegate, err := agent.AsTool(writer, nil)
	if err != nil {
		t.Fatal(err)
	}
	leadModel := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "l1", Name: "writer", Arguments: `{"task":"write it"}`}}},
		{Text: "the writer is done"},
	}}, nil).Spec("lead-model")
	lead, err := agent.New(rt, in.Model(leadModel), &agent.Options{Name: "lead", Tools: []*tools.Tool{delegate},
		OnToolResult: in.OnToolResult})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lead.Close(context.Background()) })
	t.Cleanup(func() { close(released) }) // first, should the decision never come: the writer's model goes on
	return &teamRig{rig: r, lead: lead}
}

// afterSecondRequest makes the Logic of newLogic take the END of its
// second request, and what follows it, once decided or released is
// closed.
func afterSecondRequest(newLogic func() actors.Logic, decided, released <-chan struct{}) func() actors.Logic {
	return func() actors.Logic {
		l, requests := newLogic(), 0
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_END {
				if requests++; requests == 2 {
					select {
					case <-decided:
					case <-released:
					}
				}
			}
			l.Receive(c, msg)
		})
	}
}

// A crash inside a delegation stays in the tree once the delegation is
// over: the crashed tool's actor, with its restart and failure, under
// the delegation's loop, both marked ended, under the lead's live tool.
func TestTree_FinishedDelegationKeepsItsCrash(t *testing.T) {
	r := newTeamRig(t)
	ev := r.events(t, "")
	ans, err := r.lead.Run(testCtx(t), "team", []models.Message{models.UserMessage("write it")})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "the writer is done" {
		t.Fatalf("answer %q", ans.Text)
	}
	// The actors of the delegation report their ends after it answered
	// (snapshots taken while it ran come first: the loop is shown then
	// too, not yet ended).
	const loopID = "polyweave/lead/tool-writer/writer"
	snap := ev.until("the delegation's end", func(s inspect.Snapshot) bool {
		var loopEnded, crashKept bool
		for _, n := range s.Tree {
			loopEnded = loopEnded || n.ID == loopID && n.Ended != nil
			crashKept = crashKept || n.ID == crashedTool && n.Ended != nil && n.LastFailure != ""
		}
		return loopEnded && crashKept
	})
	byID := map[string]inspect.Node{}
	for _, n := range snap.Tree {
		byID[n.ID] = n
	}
	boom, ok := byID[crashedTool]
	if !ok {
		t.Fatalf("tree %+v: want the delegation's crashed tool %s", snap.Tree, crashedTool)
	}
	// Its supervisor decided to restart it; the delegation's loop, which
	// goes on once the crashed call is answered, may stop it before the
	// restart is carried out.
	if boom.Restarts > 1 || !strings.Contains(boom.LastFailure, "boom went off") || boom.State != "stopped" || boom.Ended == nil {
		t.Fatalf("crashed tool %+v: want at most 1 restart, its failure, stopped and ended", boom)
	}
	loop := byID[loopID]
	if loop.State != "stopped" || loop.Ended == nil || loop.Role != "agent loop" {
		t.Fatalf("the delegation's loop %+v: want it shown, stopped, as an agent loop; tree %+v", loop, snap.Tree)
	}
	// Depth first: the ended loop under the live tool, the crashed tool
	// under the loop.
	at := map[string]int{}
	for i, n := range snap.Tree {
		at[n.ID] = i
	}
	parent := byID["polyweave/lead/tool-writer"]
	if parent.State != "running" || parent.Ended != nil || !(at[parent.ID] < at[loop.ID] && at[loop.ID] < at[boom.ID]) ||
		loop.Depth != parent.Depth+1 || boom.Depth != loop.Depth+1 {
		t.Fatalf("tree %+v: want the lead's tool, then the ended loop, then the crashed tool, one level down each", snap.Tree)
	}
	if !feedHas(snap, "supervision", crashedTool, "decided restart", "boom went off") {
		t.Fatalf("feed %+v: want the decision about the crash", snap.Feed)
	}
	if snap.Restarts != boom.Restarts || boom.Restarts == 1 && !feedHas(snap, "restart", crashedTool, "boom went off") {
		t.Fatalf("restarts %d, feed %+v: want the crash's restart, with its failure, if it restarted (%d)", snap.Restarts, snap.Feed, boom.Restarts)
	}
	// Only what leads to the crash is kept: the delegation's model
	// adapter ended quietly.
	for id, n := range byID {
		if n.Ended != nil && id != boom.ID && id != loop.ID {
			t.Fatalf("ended node %+v kept: only the crash and its loop should be", n)
		}
	}
	// The page shows it.
	if _, page := r.get(t, "/"); !strings.Contains(page, "tool-boom") || !strings.Contains(page, "ended") {
		t.Fatal("the page does not show the ended delegation's crash")
	}
}

// A restart of the lead's writer tool, once its delegation is over, is a
// new incarnation of it: the crash kept from the delegation under it
// stays in sight.
func TestTree_RestartKeepsTheCrashOfAFinishedDelegation(t *testing.T) {
	r := newTeamRig(t)
	ev := r.events(t, "")
	if _, err := r.lead.Run(testCtx(t), "team", []models.Message{models.UserMessage("write it")}); err != nil {
		t.Fatal(err)
	}
	const writerTool = "polyweave/lead/tool-writer"
	kept := func(s inspect.Snapshot) bool {
		for _, n := range s.Tree {
			if n.ID == crashedTool && n.Ended != nil && n.LastFailure != "" {
				return true
			}
		}
		return false
	}
	ev.until("the delegation's crash kept", kept)
	if err := r.rt.InjectPanic(writerTool, "writer tool down"); err != nil {
		t.Fatal(err)
	}
	snap := ev.until("the writer tool restarted", func(s inspect.Snapshot) bool {
		for _, n := range s.Tree {
			if n.ID == writerTool && n.Restarts == 1 && n.State == "running" {
				return true
			}
		}
		return false
	})
	if !kept(snap) {
		t.Fatalf("tree %+v: want the delegation's crash %s kept after its calling tool restarted", snap.Tree, crashedTool)
	}
}
