package remote

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// queuedStream is a server stream that receives the messages queued in it.
type queuedStream struct {
	grpc.ServerStream
	queue []*paremote.RemoteMessage
}

func (s *queuedStream) RecvMsg(m any) error {
	proto.Merge(m.(*paremote.RemoteMessage), s.queue[0])
	s.queue = s.queue[1:]
	return nil
}

// batchOf is a message batch of one envelope of typeName.
func batchOf(typeName string) *paremote.RemoteMessage {
	return &paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: &paremote.MessageBatch{
		TypeNames: []string{typeName}, Targets: []*actor.PID{actor.NewPID("127.0.0.1:7", "a")},
		Envelopes: []*paremote.MessageEnvelope{{}}}}}
}

// The test hook that ends an incoming stream (EndIncoming) ends it at the
// next message that carries a frame (a request or an answer): protoactor's
// own messages, which a peer sends when it will (its answer to a Touch
// sent when a connection opened, a watch), are delivered, so that a test
// arming it knows which message the end takes.
func TestGuard_EndNextTakesAFrame(t *testing.T) {
	touched := string((&actor.Touched{}).ProtoReflect().Descriptor().FullName())
	watch := string((&actor.Watch{}).ProtoReflect().Descriptor().FullName())
	s := &guardedStream{g: &guard{}, ServerStream: &queuedStream{queue: []*paremote.RemoteMessage{
		{MessageType: &paremote.RemoteMessage_ConnectRequest{ConnectRequest: &paremote.ConnectRequest{}}},
		batchOf(touched), batchOf(watch), batchOf(frameType), batchOf(frameType),
	}}}
	s.g.endNext.Store(true)
	for i, want := range []bool{false, false, false, true, false} {
		err := s.RecvMsg(&paremote.RemoteMessage{})
		if ended := err != nil; ended != want {
			t.Errorf("message %d: stream ended %v (%v), want %v", i, ended, err, want)
		}
	}
}

// The guard of a node, a client or NewGuard bounds a new connection's
// handshake by HandshakeTimeout (the tests that see it closed shorten it).
func TestGuard_HandshakeTimeoutByDefault(t *testing.T) {
	for name, g := range map[string]*guard{"node or client": {}, "NewGuard": &NewGuard(nil).g} {
		if got := g.handshakeTimeout(); got != HandshakeTimeout {
			t.Errorf("%s: handshake bounded by %v, want HandshakeTimeout (%v)", name, got, HandshakeTimeout)
		}
	}
}
