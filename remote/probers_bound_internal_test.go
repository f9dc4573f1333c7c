package remote

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/tools"
)

// TestNode_ProbersBoundedPerAddress: a live peer that sends Touch from many
// PIDs (futures of its system, as any protoactor code can) leaves the node
// remembering at most maxProbersPerAddress askers, not one per PID.
func TestNode_ProbersBoundedPerAddress(t *testing.T) {
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	node, err := Serve(&NodeOptions{Address: "127.0.0.1:0", Tools: []*tools.Tool{echo}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	client, err := NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	const touches = 2000
	svc := actor.NewPID(node.Address(), ServiceName)
	for range touches {
		if _, err := client.System().Root.RequestFuture(svc, &actor.Touch{}, 30*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := probers(node)
	if err != nil {
		t.Fatal(err)
	}
	if n > maxProbersPerAddress {
		t.Errorf("node remembers %d askers after %d Touches from one live peer, want at most %d", n, touches, maxProbersPerAddress)
	}
}

// probers counts the askers n's service actor remembers, read by the
// actor itself after it has handled every message sent to it before.
func probers(n *Node) (int, error) {
	r, err := n.System().Root.RequestFuture(n.service, countProbers{}, 30*time.Second).Result()
	if err != nil {
		return 0, err
	}
	return r.(int), nil
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
