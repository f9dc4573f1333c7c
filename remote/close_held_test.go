package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// envHeldAtClose: start a client ("client"), a node ("node") or a
// protoactor remote with a Guard ("guard", stopped with StopRemote), have a
// peer's batch with a watch of an actor it does not have arrive while it
// closes (see runHeldAtClose), and print "close ERR" and the goroutines
// left. With ",ctx" after the role (a client's or a node's), Close's ctx
// ends once it has begun to stop the incoming streams, and the batch
// goes on once Close has returned.
const envHeldAtClose = "POLYWEAVE_REMOTE_TEST_HELD_AT_CLOSE"

// watchType is protoactor's name for a watch on the wire.
var watchType = string((&actor.Watch{}).ProtoReflect().Descriptor().FullName())

// runHeldAtClose starts a client, a node or a remote with a Guard (role,
// see startHeldAtClose) and opens a stream to it as a peer at an address
// where nothing listens, which sends a watch of an actor the process does
// not have. The process holds the batch as its stream reads it, until its
// Close has begun to stop the incoming streams (or has returned), then
// lets it go on. Delivered then, the watch would be answered, by
// protoactor's dead letters, with a Terminated to the peer: a message to
// a remote actor that the endpoints, once stopped, cannot carry (the
// pinned protoactor panics).
func runHeldAtClose(v string) int {
	role, endCtx := strings.CutSuffix(v, ",ctx")
	addr, closeProcess, owner, err := startHeldAtClose(role)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	held, release := remote.HoldIncoming(owner, watchType)
	stopping := remote.Stopping(owner)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		_ = closeProcess(context.Background())
		return 1
	}
	peer, err := deadAddress()
	if err != nil {
		return fail(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	stream, err := paremote.NewRemotingClient(conn).Receive(context.Background())
	if err != nil {
		return fail(err)
	}
	watch, err := proto.Marshal(&actor.Watch{Watcher: actor.NewPID(peer, "watcher")})
	if err != nil {
		return fail(err)
	}
	for _, m := range []*paremote.RemoteMessage{
		{MessageType: &paremote.RemoteMessage_ConnectRequest{ConnectRequest: &paremote.ConnectRequest{
			ConnectionType: &paremote.ConnectRequest_ServerConnection{ServerConnection: &paremote.ServerConnection{
				SystemId: "peer", Address: peer}}}}},
		{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: &paremote.MessageBatch{
			TypeNames: []string{watchType},
			Targets:   []*actor.PID{actor.NewPID(addr, "nobody")},
			Envelopes: []*paremote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: watch}},
		}}},
	} {
		if err := stream.Send(m); err != nil {
			return fail(err)
		}
	}
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- closeProcess(ctx) }()
	select {
	case <-stopping:
	case err := <-closed:
		closed <- err
	}
	if endCtx {
		cancel()
		fmt.Println("close", oneLine(<-closed))
		release()
	} else {
		release()
		fmt.Println("close", oneLine(<-closed))
	}
	_ = stream.CloseSend()
	_ = conn.Close()
	printLeaks()
	return 0
}

// startHeldAtClose starts what runHeldAtClose closes: its address, its
// Close, and the *Client, *Node or *Guard whose guard holds the batch.
func startHeldAtClose(role string) (addr string, closeProcess func(context.Context) error, owner any, err error) {
	switch role {
	case "client":
		c, err := remote.NewClient(nil)
		if err != nil {
			return "", nil, nil, err
		}
		return c.Address(), c.Close, c, nil
	case "node":
		echo := tools.MustNew(tools.Definition{Name: "echo", Handler: func(_ context.Context, args json.RawMessage) (any, error) {
			return args, nil
		}})
		n, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{echo}})
		if err != nil {
			return "", nil, nil, err
		}
		return n.Address(), n.Close, n, nil
	case "guard":
		// A protoactor remote started elsewhere (a cluster member's),
		// with a Guard, stopped with StopRemote.
		rt, err := actors.NewRuntime(nil)
		if err != nil {
			return "", nil, nil, err
		}
		g := remote.NewGuard(nil)
		r := paremote.NewRemote(rt.System(), paremote.Configure("127.0.0.1", 0, paremote.WithServerOptions(g.ServerOptions()...)))
		r.Start()
		g.SetAddress(rt.System().Address())
		return rt.System().Address(), func(ctx context.Context) error {
			remote.StopRemote(rt.System(), r, g)
			return rt.Close(ctx)
		}, g, nil
	}
	return "", nil, nil, fmt.Errorf("unknown role %q", role)
}

// A batch that the incoming stream of a client, a node or a remote with a
// Guard (a cluster member's) has read as Close (StopRemote) begins is not delivered once the endpoints that would carry its
// consequences (here the answer to a watch, to the peer) have stopped:
// Close stops the incoming streams before the endpoints, and the process
// closes cleanly, where it used to panic in protoactor's endpoint
// manager.
func TestClose_BatchHeldAsCloseBegins(t *testing.T) {
	t.Parallel()
	for _, role := range []string{"client", "node", "guard"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			p := startChild(t, envHeldAtClose+"="+role)
			p.want(t, "close <nil>", "%s; want Close to succeed")
			p.want(t, "leaks none", "%s")
		})
	}
}

// A client's or a node's Close whose ctx ends while an incoming stream
// still holds a batch it read returns ctx's error, saying that the
// streams had not all ended, and leaves the endpoints to stop once they
// have: the batch goes on after Close has returned, nothing panics, and
// nothing is left running.
func TestClose_CtxEndsWhileABatchIsHeld(t *testing.T) {
	t.Parallel()
	for _, role := range []string{"client", "node"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			p := startChild(t, envHeldAtClose+"="+role+",ctx")
			if e := p.next(t); !strings.HasPrefix(e, "close ") || !strings.Contains(e, "the incoming streams had not all ended") ||
				!strings.HasSuffix(e, context.Canceled.Error()) {
				t.Errorf("%s; want ctx's error, and the incoming streams not all ended", e)
			}
			p.want(t, "leaks none", "%s")
		})
	}
}
