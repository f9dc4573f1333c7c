package remote

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// The node's connection to the client ends (the client's guard tells its
// proxy: answersLost) before the node has seen it end. A call started
// then goes out over the client's own connection, runs on the node, and
// its result may go into the node's connection that has ended: lost, and
// the node forgets the call as it sends the result, so its peerGone
// tells nothing of it. The node's sign of life (Touched) answers it as it
// answers the calls that waited when the connection ended; a call
// started after the sign of life waits for its own result.
func TestProxy_CallStartedAfterAnswersLostIsAnswered(t *testing.T) {
	const addr = "127.0.0.1:7"
	p := newProxy(ClientOptions{})
	receive(p, &peerOpened{address: addr})
	before := startCall(p, addr, "c1")
	receive(p, &answersLost{address: addr})
	after := startCall(p, addr, "c2")
	receive(p, &actor.Touched{Who: actor.NewPID(addr, ServiceName)})
	if ok, _ := answered(before); !ok {
		t.Error("call waiting when the connection ended: not answered at the node's sign of life")
	}
	if ok, _ := answered(after); !ok {
		t.Errorf("call started after the connection ended, before the node's sign of life: still waits (%d pending)", len(p.pending))
	}
	later := startCall(p, addr, "c3")
	receive(p, &actor.Touched{Who: actor.NewPID(addr, ServiceName)})
	if ok, err := answered(later); ok {
		t.Errorf("call started after the node's sign of life: answered (%v) by a later one, want it waiting for its result", err)
	}
}

// A node gone while the client waited for its sign of life: the calls
// started after it came back are not taken for lost.
func TestProxy_NodeGoneEndsTheWaitForItsSignOfLife(t *testing.T) {
	const addr = "127.0.0.1:7"
	p := newProxy(ClientOptions{RedialBackoff: -1})
	receive(p, &peerOpened{address: addr})
	startCall(p, addr, "c1")
	receive(p, &answersLost{address: addr})
	receive(p, &peerGone{address: addr})
	receive(p, &peerOpened{address: addr})
	again := startCall(p, addr, "c2")
	receive(p, &actor.Touched{Who: actor.NewPID(addr, ServiceName)})
	if ok, err := answered(again); ok {
		t.Errorf("call to a node come back: answered (%v) by a sign of life asked before it went, want it waiting", err)
	}
}

// A DESCRIBE's answer is several frames, which the node may send in
// several batches: when a connection from the node ends, the first may be
// lost with it and the rest come over a new connection (the node sends
// them there once it finds the old one ended), END last. That END does
// not make the answer whole: the DESCRIBE is answered with
// ErrConnectionLost at the node's sign of life, not with the tools that
// came.
func TestProxy_DescribeWhoseAnswerLostAPartIsNotAnsweredWithTheRest(t *testing.T) {
	const addr = "127.0.0.1:7"
	p := newProxy(ClientOptions{})
	receive(p, &peerOpened{address: addr})
	w := &waiter{node: actor.NewPID(addr, ServiceName), done: make(chan struct{})}
	receive(p, &start{frame: messages.Describe("d"), w: w})
	receive(p, &answersLost{address: addr}) // the first DESCRIPTION went with it
	receive(p, &messages.Frame{Type: messages.FrameType_DESCRIPTION, StreamId: "d", Name: "second", Payload: []byte(`{"name":"second"}`)})
	receive(p, messages.End("d"))
	if ok, err := answered(w); ok && err == nil {
		t.Fatalf("DESCRIBE answered with %d of its tools, the rest lost with the connection", len(w.descriptions))
	}
	receive(p, &actor.Touched{Who: actor.NewPID(addr, ServiceName)})
	if ok, err := answered(w); !ok || !errors.Is(err, ErrConnectionLost) {
		t.Errorf("DESCRIBE at the node's sign of life: answered %v (%v), want ErrConnectionLost", ok, err)
	}
}
