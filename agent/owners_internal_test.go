package agent

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
)

// helloAgent returns an agent on rt, with default options, whose model
// answers every conversation "Hello.".
func helloAgent(t *testing.T, rt *actors.Runtime) *Agent {
	t.Helper()
	m, err := scripted.New(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{{Text: "Hello."}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(rt, m.Spec("model"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startedAgent returns an agent on rt whose shared loop has started (a
// Run answered).
func startedAgent(t *testing.T, rt *actors.Runtime) *Agent {
	t.Helper()
	a := helloAgent(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Run(ctx, "s", []models.Message{models.UserMessage("hi")}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestLoopOwners_AgentOfAClosedRuntimeIsNotKept: a host that closes the
// runtime without closing each agent on it, then drops them, gets their
// memory back: the registry of loops by which a delegation finds its
// calling agent does not keep them.
func TestLoopOwners_AgentOfAClosedRuntimeIsNotKept(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := startedAgent(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	gone := weak.Make(a)
	a = nil
	for range 3 {
		runtime.GC()
	}
	if gone.Value() != nil {
		t.Fatal("an agent dropped after its runtime closed is still reachable")
	}
}

// TestLoopOwners_SameIDOnTwoRuntimes: loops of two runtimes may have the
// same actor id; closing the agent of one leaves the other's loop known
// as its agent's.
// TestLoopOwners_SameIDOnTwoRuntimes: loops of two runtimes may have the
// same actor id; closing the agent of one leaves the other's loop known
// as its agent's.
func TestLoopOwners_SameIDOnTwoRuntimes(t *testing.T) {
	rt1, rt2 := actorstest.NewRuntime(t, nil), actorstest.NewRuntime(t, nil)
	a1, a2 := startedAgent(t, rt1), startedAgent(t, rt2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer a2.Close(ctx)
	id1, id2 := a1.ready.Ref().String(), a2.ready.Ref().String()
	if id1 != id2 {
		t.Fatalf("the two shared loops have ids %q and %q: the case needs one id", id1, id2)
	}
	if err := a1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	loopOwners.Lock()
	got := loopOwner(rt2, id2)
	loopOwners.Unlock()
	if got != a2 {
		t.Fatalf("after the first runtime's agent closed, loop %q of the second runtime is owned by %p, want %p", id2, got, a2)
	}
}
