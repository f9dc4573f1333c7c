package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
)

// withHost is addr (host:port) with host in place of its own.
func withHost(t *testing.T, addr, host string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, port)
}

// Envelopes that arrive at a node are meant for it, whatever address
// their targets name it by: another spelling of its own (localhost), or
// another host altogether. The node delivers them to its own actors; it
// never sends them on (to itself, over and over, or to another host).
func TestNode_DeliversWhateverAddressTheTargetNames(t *testing.T) {
	t.Parallel()
	node := startNode(t, remote.DefaultAddress)
	stream := strangerStream(t, node.addr, 20*time.Second)
	targets := []string{withHost(t, node.addr, "localhost"), "192.0.2.1:9"} // TEST-NET-1: reaches no one
	batch := &paremote.MessageBatch{TypeNames: []string{"polyweave.v1.Frame"}, Senders: []*actor.PID{actor.NewPID("127.0.0.1:1", "nobody")}}
	for i, target := range targets {
		batch.Targets = append(batch.Targets, actor.NewPID(target, remote.ServiceName))
		call := messages.ToolCall("s", fmt.Sprint("c", i), "echo", json.RawMessage(`{"text":"`+target+`"}`))
		batch.Envelopes = append(batch.Envelopes, &paremote.MessageEnvelope{Target: int32(i), Sender: 1, MessageData: mustMarshal(t, call)})
	}
	if err := stream.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: batch}}); err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for range targets { // the calls run at once, in any order
		ran[node.next(t)] = true
	}
	for _, target := range targets {
		if !ran["echo "+target] {
			t.Errorf("node events %v, want the call addressed to %s run", ran, target)
		}
	}
	_ = stream.CloseSend()
	node.stop()
}

// A node reached by a loopback name (localhost) is called at the loopback
// IP it listens on, which is the address it knows itself by: it answers,
// and the client reports it by that address.
func TestClient_NodeReachedAsLocalhost(t *testing.T) {
	client, rt := setup(t)
	node := startNode(t, remote.DefaultAddress)
	ts := remoteTools(t, client, withHost(t, node.addr, "localhost"))
	echo, err := rt.Start(ts["echo"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if res := result(t, echo, messages.ToolCall("s", "c", "echo", json.RawMessage(`{"text":"hi"}`))); res.IsErrorResult() {
		t.Errorf("call of a node reached as localhost: %s", res.GetPayload())
	}
	if e := node.next(t); e != "echo hi" {
		t.Errorf("node event %q, want the call run", e)
	}
	node.stopSeen(t, client) // reported as node.addr, 127.0.0.1:PORT
}

// envEveryInterface: a test node (nodeTools) serving with AllowRemote on
// the address given, as `polyweave-node -listen 0.0.0.0:7710
// -allow-remote` does; it prints "listening ADDR" and closes when stdin
// closes.
const envEveryInterface = "POLYWEAVE_REMOTE_EVERY_INTERFACE_NODE"

func init() {
	addr := os.Getenv(envEveryInterface)
	if addr == "" {
		return
	}
	node, err := remote.Serve(&remote.NodeOptions{Address: addr, AllowRemote: true, Tools: nodeTools(func(e string) { fmt.Println(e) })})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening " + node.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = node.Close(context.Background())
	os.Exit(0)
}

// A node listening on every interface knows itself by an address no peer
// reaches it at ([::]:PORT): reached at one of its addresses (127.0.0.1
// here, a LAN address in practice), it answers.
func TestClient_NodeOnEveryInterface(t *testing.T) {
	client, _ := setup(t)
	node := startChild(t, envEveryInterface+"=0.0.0.0:0")
	said := node.next(t)
	self, ok := strings.CutPrefix(said, "listening ")
	if !ok {
		t.Fatalf("node said %q", said)
	}
	node.addr = withHost(t, self, "127.0.0.1")
	if ts := remoteTools(t, client, node.addr); len(ts) != 4 {
		t.Errorf("node on every interface, reached at %s: %d tools, want 4", node.addr, len(ts))
	}
	node.stopSeen(t, client)
}

// A node reached at its port spelled otherwise (with a leading zero)
// is called at the address it knows itself by: the client reports it by
// that address when it goes.
func TestClient_NodeReachedByAnotherPortSpelling(t *testing.T) {
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	host, port, err := net.SplitHostPort(node.addr)
	if err != nil {
		t.Fatal(err)
	}
	if ts := remoteTools(t, client, host+":0"+port); len(ts) != 4 {
		t.Errorf("node reached at %s:0%s: %d tools, want 4", host, port, len(ts))
	}
	node.stopSeen(t, client) // reported as node.addr
}
