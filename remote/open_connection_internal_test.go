package remote

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// A node whose service stopped while its connection stayed open (a node
// closing: its service stops before its remote), then a call over that
// open connection (answered by protoactor's DeadLetterResponse), then the
// connection's end: no connection ever failed to open, so the node is not
// backed off, and a call right after (a node serving again at the address)
// dials it.
func TestProxy_EndOfAnOpenConnectionIsNoFailedDial(t *testing.T) {
	const addr = "127.0.0.1:7"
	node := actor.NewPID(addr, ServiceName)
	now := time.Now()
	p := newProxy(ClientOptions{})
	p.now = func() time.Time { return now }
	receive(p, &peerOpened{address: addr})
	receive(p, &actor.Terminated{Who: node, Why: actor.TerminatedReason_Stopped}) // the service stopped
	w := startCall(p, addr, "c1")                                                 // over the connection still open
	receive(p, &actor.DeadLetterResponse{Target: node})
	if done, _ := answered(w); !done {
		t.Fatal("the call to the stopped service is not answered")
	}
	receive(p, &peerGone{address: addr}) // the open connection ends
	if done, err := answered(startCall(p, addr, "c2")); done {
		t.Errorf("the next call answered at once (%v): the node was backed off (%+v) though no connection failed to open", err, p.down[addr])
	}
}

// A call sent over a connection that stayed open when the node's service
// stopped is no dial: it leaves nothing that keeps the node's entry among
// those gone from being forgotten.
func TestProxy_SweepForgetsANodeCalledOverAnOpenConnection(t *testing.T) {
	const addr = "127.0.0.1:7"
	node := actor.NewPID(addr, ServiceName)
	now := time.Now()
	p := newProxy(ClientOptions{RedialBackoff: time.Second, MaxRedialBackoff: 4 * time.Second})
	p.now = func() time.Time { return now }
	receive(p, &peerOpened{address: addr})
	receive(p, &actor.Terminated{Who: node, Why: actor.TerminatedReason_Stopped})
	startCall(p, addr, "c1")
	receive(p, &actor.DeadLetterResponse{Target: node})
	now = now.Add(time.Hour)
	startCall(p, "127.0.0.1:8", "other") // the sweep runs
	now = now.Add(time.Hour)
	startCall(p, "127.0.0.1:9", "other2")
	if _, kept := p.down[addr]; kept {
		t.Errorf("the node is still among those gone two hours on, with no call waiting and no connection opening")
	}
}

// A node called while it starts (its remote up, its service not yet
// spawned: the watch is answered NotFound) is reported gone; once its
// service is there it serves calls over the same connection. When that
// connection later ends (the node killed), the node is reported gone
// again, and is not backed off as a node that failed to open one.
func TestProxy_NodeCalledWhileStartingIsReportedWhenItDies(t *testing.T) {
	const addr = "127.0.0.1:7"
	node := actor.NewPID(addr, ServiceName)
	now := time.Now()
	gone := 0
	p := newProxy(ClientOptions{OnNodeGone: func(string) { gone++ }})
	p.now = func() time.Time { return now }
	w := startCall(p, addr, "c1")
	receive(p, &peerOpened{address: addr})
	receive(p, &actor.DeadLetterResponse{Target: node})                            // no service yet
	receive(p, &actor.Terminated{Who: node, Why: actor.TerminatedReason_NotFound}) // the watch's answer
	if done, _ := answered(w); !done || gone != 1 {
		t.Fatalf("call answered %v, reported %d times; want answered, reported once", done, gone)
	}
	// The service is up: a call over the same connection is answered.
	w = startCall(p, addr, "c2")
	receive(p, messages.RawToolResult("c2", "c2", "hold", []byte(`{}`)))
	if done, err := answered(w); !done || err != nil {
		t.Fatalf("the call to the node serving: answered %v, %v", done, err)
	}
	receive(p, &peerGone{address: addr}) // the node dies
	if gone != 2 {
		t.Errorf("node reported gone %d times; it served after its first report and then died", gone)
	}
	if r := p.down[addr]; r != nil && r.failures > 0 {
		t.Errorf("node backed off as after %d failed dials; its connection had opened", r.failures)
	}
}
