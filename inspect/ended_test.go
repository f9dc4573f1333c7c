package inspect

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The ended actors kept in the tree go after KeepEnded, when their path
// runs again, and past maxEnded (the oldest first).
func TestTree_EndedActorsExpire(t *testing.T) {
	rt, in := newTestInspector(t)
	host := rt.Host().Id
	crash := func(id string, at time.Time) {
		in.actorEvent(actors.ActorEvent{Time: at, Actor: actors.ActorInfo{ID: host + "/" + id, Parent: host, Name: id,
			State: actors.ActorStopped, Restarts: 1, LastFailure: errors.New("crashed"), LastFailureAt: at}})
	}
	ended := func() map[string]bool {
		out := map[string]bool{}
		for _, n := range in.Snapshot("").Tree {
			if n.Ended != nil {
				out[n.Name] = true
			}
		}
		return out
	}
	now := time.Now()
	crash("old", now.Add(-KeepEnded-time.Second))
	crash("new", now)
	crash("again", now)
	if got := ended(); len(got) != 2 || !got["new"] || !got["again"] {
		t.Fatalf("ended nodes %v, want new and again (old is past KeepEnded)", got)
	}
	in.actorEvent(actors.ActorEvent{Time: now, Actor: actors.ActorInfo{ID: host + "/again", Parent: host, Name: "again",
		State: actors.ActorRunning}})
	if got := ended(); len(got) != 1 || !got["new"] {
		t.Fatalf("ended nodes %v, want new alone (again runs again)", got)
	}
	for i := range maxEnded + 10 {
		crash(fmt.Sprintf("n%03d", i), now)
	}
	if got := ended(); len(got) != maxEnded || got["new"] || got["n009"] || !got["n010"] {
		t.Fatalf("%d ended nodes, want the newest %d", len(got), maxEnded)
	}
}

// A crashed actor that stopped before its supervisor's decision was
// reported (its delegation's loop stopping as the crash is handled) is
// still kept, with the failure the decision names and the loop it ran
// under, once the decision comes.
func TestTree_DecisionAfterQuietStopKeepsTheCrash(t *testing.T) {
	rt, in := newTestInspector(t)
	host := rt.Host().Id
	delegating := host + "/tool-writer"
	loop := delegating + "/writer"
	tool, model := loop+"/tool-boom", loop+"/writer-model"
	in.lock()
	in.models["writer-model"] = true
	in.mu.Unlock()
	now := time.Now()
	stop := func(id, parent, name string) {
		in.actorEvent(actors.ActorEvent{Time: now, Actor: actors.ActorInfo{ID: id, Parent: parent, Name: name,
			State: actors.ActorStopped}})
	}
	stop(tool, loop, "tool-boom")
	stop(model, loop, "writer-model")
	stop(loop, delegating, "writer")
	for _, n := range in.Snapshot("").Tree {
		if n.Ended != nil {
			t.Fatalf("ended node %+v kept before any failure is known", n)
		}
	}
	in.supervisionEvent(supervisor.Event{Time: now, Supervisor: loop, Child: tool, Directive: supervisor.Restart,
		Reason: errors.New("boom went off")})
	byID := map[string]Node{}
	for _, n := range in.Snapshot("").Tree {
		byID[n.ID] = n
	}
	crashed, ok := byID[tool]
	if !ok || crashed.Ended == nil || crashed.LastFailure != "boom went off" {
		t.Fatalf("crashed tool %+v (found %v): want it kept, ended, with the decision's failure", crashed, ok)
	}
	if l := byID[loop]; l.Ended == nil || l.Role != "agent loop" {
		t.Fatalf("its loop %+v: want it kept, ended, as an agent loop", l)
	}
	if _, ok := byID[model]; ok {
		t.Fatal("the model adapter that stopped quietly is kept")
	}
}

// A restart of an actor, under which a finished delegation's crash is
// kept, is a new incarnation of it: the crash stays. Its supervisor's
// decision, reported before the restart, says running, with the failure
// and no restart yet counted: nothing ran again then. The same path
// started afresh replaces the records under it.
func TestTree_RestartKeepsTheCrashUnderIt(t *testing.T) {
	rt, in := newTestInspector(t)
	host := rt.Host().Id
	lead := host + "/lead"
	delegating := lead + "/tool-writer"
	loop := delegating + "/writer"
	tool := loop + "/tool-boom"
	now := time.Now()
	boom := errors.New("boom went off")
	event := func(id, parent string, state actors.ActorState, restarts int, failure error) {
		in.actorEvent(actors.ActorEvent{Time: now, Actor: actors.ActorInfo{ID: id, Parent: parent,
			Name: id[len(parent)+1:], State: state, Restarts: restarts, LastFailure: failure}})
	}
	event(loop, delegating, actors.ActorStopped, 0, nil)
	event(tool, loop, actors.ActorStopped, 1, boom)
	kept := func() bool { return keptEnded(in, tool) }
	if !kept() {
		t.Fatal("the delegation's crash is not kept")
	}
	down := errors.New("writer tool down")
	in.actorEvent(actors.ActorEvent{Time: now, Decision: true, Actor: actors.ActorInfo{ID: delegating, Parent: lead,
		Name: "tool-writer", State: actors.ActorRunning, LastFailure: down}}) // its supervisor's decision
	if !kept() {
		t.Fatal("the crash under the tool went at its supervisor's decision to restart it")
	}
	event(delegating, lead, actors.ActorRestarting, 1, down)
	event(delegating, lead, actors.ActorRunning, 1, down)
	if !kept() {
		t.Fatal("the crash under the tool went at its restart")
	}
	event(delegating, lead, actors.ActorStopped, 1, down)
	event(delegating, lead, actors.ActorRunning, 0, nil) // started afresh
	if kept() {
		t.Fatal("the crash under the tool is kept after the tool started afresh")
	}
}

// A crashed actor whose stop is reported after its supervisor's decision
// (the decision and the stop are reported from two goroutines: the
// registry dropped the actor first, the decision's report came first) is
// kept all the same, with the decision's failure and the loop it ran
// under.
func TestTree_QuietStopAfterDecisionKeepsTheCrash(t *testing.T) {
	rt, in := newTestInspector(t)
	host := rt.Host().Id
	delegating := host + "/tool-writer"
	loop := delegating + "/writer"
	tool := loop + "/tool-boom"
	now := time.Now()
	stop := func(id, parent, name string) {
		in.actorEvent(actors.ActorEvent{Time: now, Actor: actors.ActorInfo{ID: id, Parent: parent, Name: name,
			State: actors.ActorStopped}})
	}
	stop(loop, delegating, "writer")
	in.supervisionEvent(supervisor.Event{Time: now, Supervisor: loop, Child: tool, Directive: supervisor.Restart,
		Reason: errors.New("boom went off")})
	stop(tool, loop, "tool-boom")
	byID := map[string]Node{}
	for _, n := range in.Snapshot("").Tree {
		byID[n.ID] = n
	}
	crashed, ok := byID[tool]
	if !ok || crashed.Ended == nil || crashed.State != "stopped" || crashed.LastFailure != "boom went off" {
		t.Fatalf("crashed tool %+v (found %v): want it kept, stopped, with the decision's failure", crashed, ok)
	}
	if l, ok := byID[loop]; !ok || l.Ended == nil {
		t.Fatalf("its loop %+v (found %v): want it kept, ended", l, ok)
	}

	// A decision is waited for once: the same path, started afresh and
	// stopped quietly, is not kept.
	in.actorEvent(actors.ActorEvent{Time: now, Actor: actors.ActorInfo{ID: loop, Parent: delegating, Name: "writer",
		State: actors.ActorRunning}})
	stop(tool, loop, "tool-boom")
	for _, n := range in.Snapshot("").Tree {
		if n.Ended != nil {
			t.Fatalf("ended node %+v kept after the path started afresh and stopped quietly", n)
		}
	}
}

// newTestInspector starts a runtime and an inspector on it, which t's
// cleanup closes, the inspector first.
func newTestInspector(t testing.TB) (*actors.Runtime, *Inspector) {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	in, err := New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return rt, in
}

// A supervisor's decision that reaches the inspector after the stop of
// the child it is about (an immediate restart's decision reports the
// child running, with the restarts of the incarnation that failed) runs
// nothing again: the crash kept at the stop stays.
func TestTree_DecisionAfterTheStopKeepsTheCrash(t *testing.T) {
	rt, in := newTestInspector(t)
	host := rt.Host().Id
	tool := host + "/tool-boom"
	now := time.Now()
	boom := errors.New("boom went off")
	info := actors.ActorInfo{ID: tool, Parent: host, Name: "tool-boom", State: actors.ActorStopped,
		Restarts: 1, LastFailure: boom, LastFailureAt: now}
	in.actorEvent(actors.ActorEvent{Time: now, Actor: info})
	kept := func() bool { return keptEnded(in, tool) }
	if !kept() {
		t.Fatal("the crashed tool is not kept at its stop")
	}
	info.State = actors.ActorRunning
	in.actorEvent(actors.ActorEvent{Time: now, Actor: info, Decision: true})
	if !kept() {
		t.Fatal("the crash went at a decision about it, reported after its stop")
	}
}

// keptEnded reports whether the tree of in keeps id as an actor that
// ended.
func keptEnded(in *Inspector, id string) bool {
	for _, n := range in.Snapshot("").Tree {
		if n.ID == id && n.Ended != nil {
			return true
		}
	}
	return false
}
