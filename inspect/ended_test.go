package inspect

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
)

// The ended actors kept in the tree go after KeepEnded, when their path
// runs again, and past maxEnded (the oldest first).
func TestTree_EndedActorsExpire(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := New(rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
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
