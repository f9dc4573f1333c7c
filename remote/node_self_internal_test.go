package remote

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A node listening on every interface (polyweave-node -listen 0.0.0.0:P
// -allow-remote) calls itself [::]:P; the client dials it at 127.0.0.1:P
// (or a LAN address) and keys its calls by that. The node names itself in
// its signs of life (Touched.Who), its Terminated and the connections it
// opens to the client (which answersLost is told by).
const (
	selfAddr    = "[::]:7"
	dialledAddr = "127.0.0.1:7"
)

// openNodeOnEveryInterface returns a proxy with a connection open to the
// node at dialledAddr, which told it (answering askSelf) that it calls
// itself selfAddr.
func openNodeOnEveryInterface() *proxy {
	p := newProxy(ClientOptions{})
	receive(p, &peerOpened{address: dialledAddr})
	p.learnSelf(dialledAddr, selfAddr)
	return p
}

// The calls waiting when the connection from the node ended, and those
// started before its sign of life, are answered at that sign of life, and
// the node is no longer unsure.
func TestProxy_NodeCallingItselfOtherwise_SignOfLifeAnswersLostCalls(t *testing.T) {
	p := openNodeOnEveryInterface()
	before := startCall(p, dialledAddr, "c1")
	receive(p, &answersLost{address: selfAddr})
	if !p.unsure[dialledAddr] {
		t.Fatalf("connection from %s (dialled %s) ended: node not unsure", selfAddr, dialledAddr)
	}
	during := startCall(p, dialledAddr, "c2")
	receive(p, &actor.Touched{Who: actor.NewPID(selfAddr, ServiceName)})
	if ok, _ := answered(before); !ok {
		t.Error("call waiting when the connection from the node ended: not answered at its sign of life")
	}
	if ok, _ := answered(during); !ok {
		t.Error("call started before the node's sign of life: not answered at it")
	}
	if p.unsure[dialledAddr] {
		t.Errorf("node %s still unsure after its sign of life (Who %s)", dialledAddr, selfAddr)
	}
	after := startCall(p, dialledAddr, "c3")
	if after.lost {
		t.Error("call after the node's sign of life marked lost")
	}
}

// The node's service stopping with the connection open is told by a
// Terminated naming the node's own address: the calls waiting on the
// address dialled are answered.
func TestProxy_NodeCallingItselfOtherwise_ServiceStoppedAnswersCalls(t *testing.T) {
	p := openNodeOnEveryInterface()
	w := startCall(p, dialledAddr, "c1")
	receive(p, &actor.Terminated{Who: actor.NewPID(selfAddr, ServiceName), Why: actor.TerminatedReason_Stopped})
	if ok, err := answered(w); !ok || err == nil {
		t.Errorf("call on %s after the node's service (%s) stopped: answered %v, error %v", dialledAddr, selfAddr, ok, err)
	}
}

// What the client learned of a node is forgotten with its connection (the
// next may reach another node), and only kept while it is open: one entry
// per node with a connection open.
func TestProxy_NodeSelfForgottenWithItsConnection(t *testing.T) {
	p := openNodeOnEveryInterface()
	receive(p, &peerGone{address: dialledAddr})
	if len(p.selves) != 0 {
		t.Errorf("node gone: still known as %v", p.selves)
	}
	p.learnSelf(dialledAddr, selfAddr) // a late answer
	if len(p.selves) != 0 {
		t.Errorf("answer after the node's connection ended kept: %v", p.selves)
	}
	receive(p, &peerOpened{address: dialledAddr})
	w := startCall(p, dialledAddr, "c1")
	receive(p, &actor.Terminated{Who: actor.NewPID(selfAddr, ServiceName), Why: actor.TerminatedReason_Stopped})
	if ok, _ := answered(w); ok {
		t.Error("a stop of another node (not learned on this connection) answered the call")
	}
}
