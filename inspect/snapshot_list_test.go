package inspect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
)

// The id of a call waiting for approval is the model's, of any length:
// it is clipped like the ids of pending calls.
func TestApprovals_WaitingIDClipped(t *testing.T) {
	_, in := newTestInspector(t)
	id := strings.Repeat("i", 1<<16)
	in.held(heldApproval{id: id, tool: "echo", stream: "s", args: []byte(`{}`), since: time.Now()})
	w := in.Snapshot("s").Session.Approvals
	if len(w) != 1 {
		t.Fatalf("approvals %+v, want one", w)
	}
	if len(w[0].ID) > in.opts.Clip+32 || !strings.HasPrefix(w[0].ID, "iii") {
		t.Fatalf("waiting call's id is %d bytes, want it clipped to about %d", len(w[0].ID), in.opts.Clip)
	}
}

// A snapshot's tree agrees with the changes the inspector has applied:
// an actor that ended after a crash and runs again while a snapshot is
// taken is shown, alive or ended, never missing (the actor list read
// before the changes applied since, with the record of its end dropped).
func TestSnapshot_ActorListConsistentWithAppliedEvents(t *testing.T) {
	rt, in := newTestInspector(t)
	host := rt.Host().Id
	id := host + "/worker"
	info := actors.ActorInfo{ID: id, Parent: host, Name: "worker", State: actors.ActorStopped, Restarts: 1,
		LastFailure: errors.New("crashed"), LastFailureAt: time.Now()}
	in.actorEvent(actors.ActorEvent{Time: time.Now(), Actor: info})
	before := in.actors() // the registry without the worker
	delivered := make(chan struct{})
	// The worker starts again while the snapshot reads the list: its
	// event is delivered concurrently, as the runtime delivers it, and
	// lands first unless the snapshot holds the inspector's lock.
	in.actors = func() []actors.ActorInfo {
		again := info
		again.State, again.Restarts, again.LastFailure = actors.ActorRunning, 2, nil
		go func() {
			in.actorEvent(actors.ActorEvent{Time: time.Now(), Actor: again})
			close(delivered)
		}()
		if in.mu.TryLock() {
			in.mu.Unlock()
			<-delivered
		}
		return before
	}
	tree := in.Snapshot("").Tree
	<-delivered
	for _, n := range tree {
		if n.ID == id {
			return
		}
	}
	t.Fatalf("worker missing from the tree %+v: neither alive in the list read nor ended", tree)
}
