package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// nodeTools are served by the test nodes. started receives the call id of
// each "block" call once its handler runs; cancelled receives it once the
// handler's context is done.
type nodeTools struct {
	calls     atomic.Int64
	started   chan string
	cancelled chan string
}

func newNodeTools() *nodeTools {
	return &nodeTools{started: make(chan string, 16), cancelled: make(chan string, 16)}
}

func (n *nodeTools) list(t *testing.T) []*tools.Tool {
	type echoIn struct {
		Text string `json:"text"`
	}
	echo := tools.MustNewTyped(tools.Definition{Name: "echo", Description: "Echoes its text.", Capabilities: []string{"read", "net"}, Idempotent: true},
		func(_ context.Context, in echoIn) (map[string]string, error) {
			n.calls.Add(1)
			return map[string]string{"echo": in.Text}, nil
		})
	block := tools.MustNew(tools.Definition{Name: "block", Description: "Runs until cancelled.", Timeout: 5 * time.Second,
		Irreversible: true, Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			n.calls.Add(1)
			var in struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(args, &in)
			n.started <- in.ID
			<-ctx.Done()
			n.cancelled <- in.ID
			return nil, ctx.Err()
		}})
	fail := tools.MustNew(tools.Definition{Name: "fail", Handler: func(context.Context, json.RawMessage) (any, error) {
		n.calls.Add(1)
		return nil, errors.New("the disk is full")
	}})
	return []*tools.Tool{echo, block, fail}
}

// setup starts a node serving nt's tools, a client, and a host runtime;
// cleanup closes them all and checks for leaked goroutines.
func setup(t *testing.T, nt *nodeTools) (*remote.Node, *remote.Client, *actors.Runtime) {
	t.Helper()
	// The runtime's cleanup, which checks for leaked goroutines, runs
	// after the node's and the client's.
	rt := actorstest.NewRuntime(t, nil)
	node, err := remote.Serve(&remote.NodeOptions{Tools: nt.list(t)})
	if err != nil {
		t.Fatal(err)
	}
	client, err := remote.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := client.Close(ctx); err != nil {
			t.Errorf("client close: %v", err)
		}
		if err := node.Close(ctx); err != nil {
			t.Errorf("node close: %v", err)
		}
	})
	return node, client, rt
}

func remoteTools(t *testing.T, c *remote.Client, addr string) map[string]*tools.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ts, err := c.Tools(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*tools.Tool{}
	for _, tool := range ts {
		m[tool.Name()] = tool
	}
	return m
}

// result sends a call into a tool duplex and returns its one result.
func result(t *testing.T, conn *actors.Conn, call *messages.Frame) *messages.Frame {
	t.Helper()
	if err := conn.Send(call); err != nil {
		t.Fatal(err)
	}
	return await(t, conn, call.GetToolCallId())
}

// await returns the one result of call id, checking that nothing but the
// END follows it for that call.
func await(t *testing.T, conn *actors.Conn, id string) *messages.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var res *messages.Frame
	for {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("waiting for the result of %s: %v", id, err)
		}
		switch {
		case f.GetType() == messages.FrameType_TOOL_RESULT && f.GetToolCallId() == id:
			if res != nil {
				t.Fatalf("second result for %s: %s", id, f.GetPayload())
			}
			res = f
		case f.GetType() == messages.FrameType_END && f.GetToolCallId() == id:
			if res == nil {
				t.Fatalf("END before a result for %s", id)
			}
			return res
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The definition of a remote tool is the node's, from DESCRIBE over the
// wire, and calls behave as they do locally.
func TestClient_ToolsLikeLocal(t *testing.T) {
	nt := newNodeTools()
	node, client, rt := setup(t, nt)
	ts := remoteTools(t, client, node.Address())
	if len(ts) != 3 {
		t.Fatalf("got %d tools, want 3", len(ts))
	}
	for _, local := range nt.list(t) {
		r := ts[local.Name()]
		if r == nil {
			t.Fatalf("no remote %s", local.Name())
		}
		ld, rd := local.Description(), r.Description()
		lj, _ := json.Marshal(ld)
		rj, _ := json.Marshal(rd)
		if string(lj) != string(rj) {
			t.Errorf("description of %s:\nremote %s\nlocal  %s", local.Name(), rj, lj)
		}
	}

	echo, err := rt.Start(ts["echo"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, echo, messages.ToolCall("s", "c1", "echo", json.RawMessage(`{"text":"hi"}`)))
	if res.IsErrorResult() || string(res.GetPayload()) != `{"echo":"hi"}` {
		t.Errorf("echo result %s (error %v)", res.GetPayload(), res.IsErrorResult())
	}
	// Invalid arguments are refused on the host: the node never sees them.
	before := nt.calls.Load()
	res = result(t, echo, messages.ToolCall("s", "c2", "echo", json.RawMessage(`{"text":5}`)))
	if tools.KindOf(res) != tools.FailureInvalidArguments {
		t.Errorf("invalid arguments: kind %q, payload %s", tools.KindOf(res), res.GetPayload())
	}
	if nt.calls.Load() != before {
		t.Error("a call with invalid arguments reached the node")
	}

	fail, err := rt.Start(ts["fail"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	res = result(t, fail, messages.ToolCall("s", "c3", "fail", nil))
	if !res.IsErrorResult() || !strings.Contains(string(res.GetPayload()), "the disk is full") {
		t.Errorf("failing tool: %s", res.GetPayload())
	}
}

// CANCEL and a timeout stop the work on the node, not just the waiting.
func TestClient_CancelAndTimeoutReachTheNode(t *testing.T) {
	nt := newNodeTools()
	node, client, rt := setup(t, nt)
	ts := remoteTools(t, client, node.Address())
	block, err := rt.Start(ts["block"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := block.Send(messages.ToolCall("s", "c1", "block", json.RawMessage(`{"id":"one"}`))); err != nil {
		t.Fatal(err)
	}
	if id := <-nt.started; id != "one" {
		t.Fatalf("started %q", id)
	}
	res := result(t, block, messages.Cancel("s", "c1"))
	if tools.KindOf(res) != tools.FailureCancelled {
		t.Errorf("cancelled call: kind %q, %s", tools.KindOf(res), res.GetPayload())
	}
	if id := <-nt.cancelled; id != "one" {
		t.Errorf("node cancelled %q", id)
	}

	// The tool's own timeout (5 s on the node) holds on the host.
	if got := ts["block"].Definition().Timeout; got != 5*time.Second {
		t.Errorf("remote timeout %v, want the node's 5s", got)
	}
}

// A node that goes away mid-call: the call is answered (error) at once,
// and a node serving again at the same address answers later calls.
func TestClient_NodeGoneMidCall(t *testing.T) {
	nt := newNodeTools()
	node, client, rt := setup(t, nt)
	addr := node.Address()
	ts := remoteTools(t, client, addr)
	block, err := rt.Start(ts["block"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := block.Send(messages.ToolCall("s", "c1", "block", json.RawMessage(`{"id":"x"}`))); err != nil {
		t.Fatal(err)
	}
	<-nt.started
	start := time.Now()
	if err := node.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := await(t, block, "c1")
	if !res.IsErrorResult() {
		t.Fatalf("call on a closed node: %s", res.GetPayload())
	}
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("answered after %v, not before the 5s timeout", d)
	}

	nt2 := newNodeTools()
	node2, err := remote.Serve(&remote.NodeOptions{Address: addr, Tools: nt2.list(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer node2.Close(context.Background())
	echo, err := rt.Start(ts["echo"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	res = result(t, echo, messages.ToolCall("s", "c2", "echo", json.RawMessage(`{"text":"back"}`)))
	if res.IsErrorResult() || string(res.GetPayload()) != `{"echo":"back"}` {
		t.Errorf("call after the node came back: %s", res.GetPayload())
	}
}

// A node that is not there: the call fails fast with ErrNodeUnreachable.
func TestClient_NoNode(t *testing.T) {
	nt := newNodeTools()
	node, client, rt := setup(t, nt)
	ts := remoteTools(t, client, node.Address())
	if err := node.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	echo, err := rt.Start(ts["echo"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, echo, messages.ToolCall("s", "c", "echo", json.RawMessage(`{"text":"anyone?"}`)))
	if !res.IsErrorResult() || !strings.Contains(string(res.GetPayload()), "unreachable") {
		t.Errorf("call to a dead node: %s", res.GetPayload())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := client.Tools(ctx, node.Address()); !errors.Is(err, remote.ErrNodeUnreachable) {
		t.Errorf("Tools of a dead node: %v", err)
	}
}

// A message of a type the node does not know is dropped by the guard
// instead of crashing the node, which goes on serving.
func TestNode_UnknownTypeDropped(t *testing.T) {
	nt := newNodeTools()
	node, client, rt := setup(t, nt)
	conn, err := grpc.Dial(node.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
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
	target := actor.NewPID(node.Address(), remote.ServiceName)
	batch := &paremote.MessageBatch{
		TypeNames: []string{"stranger.v9.Unknown", "polyweave.v1.Frame"},
		Targets:   []*actor.PID{target},
		Envelopes: []*paremote.MessageEnvelope{
			{TypeId: 0, Target: 0, MessageData: []byte{1, 2, 3}},                    // unknown type
			{TypeId: 7, Target: 0},                                                  // no such type index
			{TypeId: 1, Target: 3},                                                  // no such target
			{TypeId: 1, Target: 0, SerializerId: 9},                                 // no such serializer
			{TypeId: 1, Target: 0, Sender: 4},                                       // no such sender
			{TypeId: 1, Target: 0, MessageData: mustMarshal(t, messages.Tick("s"))}, // fine
		},
	}
	if err := stream.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: batch}}); err != nil {
		t.Fatal(err)
	}
	// The node handles a connection's messages in order: once it has seen
	// the end of this one, it has handled the batch.
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the node answered the batch")
	}
	if got := node.Dropped(); got != 5 {
		t.Errorf("node dropped %d envelopes, want 5", got)
	}
	// The node still serves.
	ts := remoteTools(t, client, node.Address())
	echo, err := rt.Start(ts["echo"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, echo, messages.ToolCall("s", "c", "echo", json.RawMessage(`{"text":"still there"}`)))
	if res.IsErrorResult() {
		t.Errorf("node after the bad batch: %s", res.GetPayload())
	}
}
