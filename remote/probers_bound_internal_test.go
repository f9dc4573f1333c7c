package remote

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors/actorstest"
)

// TestNode_ProbersBoundedPerAddress: askers that send Touch from many PIDs
// of one address (futures, as any protoactor code can) leave the node's
// service actor remembering at most maxProbersPerAddress of them, not one
// per PID. (The service runs in a plain actor system: a second remote in
// this test binary would race with the shared client's on gRPC's global
// logger, which protoactor sets in every remote's Start.)
func TestNode_ProbersBoundedPerAddress(t *testing.T) {
	system := actorstest.HostSystem(t)
	n := &Node{log: slog.New(slog.DiscardHandler), probers: map[string][]*actor.PID{}, loads: newLoads(0)}
	svc := system.Root.Spawn(actor.PropsFromFunc(n.receive))
	defer system.Root.Stop(svc)
	const touches = 2000
	for range touches {
		if _, err := system.Root.RequestFuture(svc, &actor.Touch{}, 30*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := system.Root.RequestFuture(svc, countProbers{}, 30*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r.(int) > maxProbersPerAddress {
		t.Errorf("node remembers %d askers after %d Touches from one address, want at most %d", r, touches, maxProbersPerAddress)
	}
}

// TestRemember: an asker that asks again becomes the latest, and the
// oldest is dropped beyond maxProbersPerAddress.
func TestRemember(t *testing.T) {
	var ps []*actor.PID
	pid := func(i int) *actor.PID { return actor.NewPID("peer:1", "p"+string(rune('a'+i))) }
	for i := range maxProbersPerAddress {
		ps = remember(ps, pid(i))
	}
	ps = remember(ps, pid(0))                    // a asks again: the latest
	ps = remember(ps, pid(maxProbersPerAddress)) // one more: b, the oldest, goes
	want := []string{"pc", "pd", "pa", "pe"}
	if len(ps) != len(want) {
		t.Fatalf("remembered %v, want %v", ps, want)
	}
	for i, p := range ps {
		if p.GetId() != want[i] {
			t.Fatalf("remembered %v, want ids %v", ps, want)
		}
	}
}
