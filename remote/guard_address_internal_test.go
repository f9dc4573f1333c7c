package remote

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
)

// A Guard told its remote's address delivers every envelope there,
// whatever address its target names; one not told leaves targets as they
// are.
func TestGuard_SetAddressRetargets(t *testing.T) {
	batch := func() *paremote.MessageBatch {
		return &paremote.MessageBatch{Targets: []*actor.PID{actor.NewPID("localhost:7", "a"), actor.NewPID("192.0.2.1:9", "b")}}
	}
	g := NewGuard(nil)
	b := batch()
	g.g.retarget(b)
	if b.Targets[0].Address != "localhost:7" || b.Targets[1].Address != "192.0.2.1:9" {
		t.Errorf("guard with no address rewrote targets: %v", b.Targets)
	}
	g.SetAddress("127.0.0.1:7")
	b = batch()
	g.g.retarget(b)
	for _, pid := range b.Targets {
		if pid.Address != "127.0.0.1:7" {
			t.Errorf("target %v not rewritten to the guard's address 127.0.0.1:7", pid)
		}
	}
	if b.Targets[0].Id != "a" || b.Targets[1].Id != "b" {
		t.Errorf("target ids changed: %v", b.Targets)
	}
}
