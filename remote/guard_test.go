package remote_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
)

// A batch holding messages of types the node does not know, and malformed
// envelopes, next to a good one: the guard drops the bad ones instead of
// letting protoactor crash the node, and the good one is delivered.
func TestNode_UnknownTypeDropped(t *testing.T) {
	t.Parallel()
	node := startNode(t, remote.DefaultAddress)
	stream := strangerStream(t, node.addr, 10*time.Second)
	good := messages.ToolCall("s", "c", "echo", json.RawMessage(`{"text":"delivered"}`))
	batch := &paremote.MessageBatch{
		TypeNames: []string{"stranger.v9.Unknown", "polyweave.v1.Frame"},
		Targets:   []*actor.PID{actor.NewPID(node.addr, remote.ServiceName)},
		Senders:   []*actor.PID{actor.NewPID("127.0.0.1:1", "nobody")},
		Envelopes: []*paremote.MessageEnvelope{
			{TypeId: 0, Target: 0, MessageData: []byte{1, 2, 3}}, // unknown type
			{TypeId: 7, Target: 0},                               // no such type index
			{TypeId: 1, Target: 3},                               // no such target
			{TypeId: 1, Target: 0, SerializerId: 9},              // no such serializer
			{TypeId: 1, Target: 0, Sender: 4},                    // no such sender
			{TypeId: 1, Target: 0, Sender: 1, MessageData: mustMarshal(t, good)},
		},
	}
	if err := stream.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: batch}}); err != nil {
		t.Fatal(err)
	}
	node.want(t, "echo delivered", "node event %q, want the good message run")
	_ = stream.CloseSend()
	node.stop()
	node.want(t, "dropped 5", "node event %q, want 5 envelopes dropped")
}

// strangerStream opens a Remoting stream to the node at addr as a peer
// speaking protoactor's wire by hand (a stranger at 127.0.0.1:1), and
// returns it once its connect request is answered; the stream ends with
// the test, or after timeout.
func strangerStream(t *testing.T, addr string, timeout time.Duration) paremote.Remoting_ReceiveClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	stream, err := paremote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_ConnectRequest{
		ConnectRequest: &paremote.ConnectRequest{ConnectionType: &paremote.ConnectRequest_ServerConnection{
			ServerConnection: &paremote.ServerConnection{SystemId: "stranger", Address: "127.0.0.1:1"}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	return stream
}
