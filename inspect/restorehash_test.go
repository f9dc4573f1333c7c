package inspect_test

import (
	"context"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/agent"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/inspect"
)

// TestRestoreApprovals_HashInSessionID: a session id may hold a '#' or
// a '%', which the stream ids of its attempts escape (see
// agent.StreamID): the calls a session "t#2" held are restored to that
// session (not to a session "t", as if "#2" were an attempt's suffix),
// and its answer, on its own stream, clears them.
func TestRestoreApprovals_HashInSessionID(t *testing.T) {
	store := memstore.New(nil)
	t.Cleanup(func() { store.Close() })
	rt := actorstest.NewRuntime(t, nil)
	ids := []string{"t#2", "u%23v"}
	before, _ := durableEcho(t, rt, store, nil)
	for _, id := range ids {
		var w *agent.WaitingError
		if _, err := before.Run(testCtx(t), id, restoreAsk); !errors.As(err, &w) {
			t.Fatalf("session %q: %v, want call_1 waiting", id, err)
		}
	}
	if err := before.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	in, err := inspect.New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	a, _ := durableEcho(t, rt, store, in)
	if err := in.RestoreAgentApprovals(store, "durable", ids...); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		d := in.Snapshot(id).Session
		if d == nil || d.Session != id || len(d.Approvals) != 1 || d.Approvals[0].ID != "call_1" {
			t.Fatalf("session %q shows %+v, want its call_1 waiting (listed %q)", id, d, listedIDs(in))
		}
	}
	for _, id := range ids {
		if _, err := a.Resume(testCtx(t), id, restoreAsk, agent.Approve("call_1")); err != nil {
			t.Fatalf("resume %q: %v", id, err)
		}
		if d := in.Snapshot(id).Session; d == nil || len(d.Approvals) != 0 {
			t.Errorf("session %q still shows a call waiting after its approval: %+v", id, d)
		}
	}
	if ids := listedIDs(in); len(ids) != 2 {
		t.Errorf("listed %q, want only the two sessions", ids)
	}
}
