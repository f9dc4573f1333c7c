package remote_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// Child roles of the test binary (see TestMain), besides the node.
const (
	// envClient: call hold (id "c") on the node at this address, print
	// "calling", then on a line "close" on stdin close the client and
	// print "closed" and the call's error; on a line "end", end the
	// node's connection to the client (see remote.EndIncoming: a DESCRIBE
	// makes the node send on it), and print the call's error once it
	// comes. A test may SIGKILL it instead.
	envClient = "POLYWEAVE_REMOTE_TEST_CLIENT"
	// envCloseRace: race many DESCRIBE requests against Close (see
	// runCloseRace).
	envCloseRace = "POLYWEAVE_REMOTE_TEST_CLOSE_RACE"
	// envSilentClose: close a client while it connects to a silent peer
	// (see runSilentClose).
	envSilentClose = "POLYWEAVE_REMOTE_TEST_SILENT_CLOSE"
	// envClientAt: start a client on this address (see runClientAt).
	envClientAt = "POLYWEAVE_REMOTE_TEST_CLIENT_AT"
)

func runTestClient(addr string) int {
	c, hold := holdOf(nil, addr)
	if c == nil {
		return 1
	}
	done := make(chan error, 1)
	if hold != nil {
		go func() {
			_, err := hold.Definition().Handler(context.Background(), json.RawMessage(`{"id":"c"}`))
			done <- err
		}()
	}
	fmt.Println("calling")
	var callErr error
	answered := false
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "close":
			fmt.Println("closed", c.Close(context.Background()))
			if !answered {
				callErr = <-done
			}
			fmt.Println("call", callErr)
		case "end":
			remote.EndIncoming(c)
			ctx, cancel := context.WithCancel(context.Background())
			described := make(chan struct{})
			go func() {
				defer close(described)
				_, _ = c.Tools(ctx, addr) // its answer may be lost with the connection
			}()
			callErr, answered = <-done, true
			cancel()
			<-described
			fmt.Println("call", callErr)
		}
	}
	return 0
}

// holdOf makes a client with opts in a child process and returns it with
// the "hold" tool of the node at addr (nil when the node has none),
// described within 30 s; when it cannot, it prints why on stderr and
// returns a nil client.
func holdOf(opts *remote.ClientOptions, addr string) (*remote.Client, *tools.Tool) {
	c, err := remote.NewClient(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := c.Tools(ctx, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, nil
	}
	var hold *tools.Tool
	for _, tool := range ts {
		if tool.Name() == "hold" {
			hold = tool
		}
	}
	return c, hold
}

// runCloseRace starts raceCalls DESCRIBE requests at once to an address
// that accepts TCP but never speaks gRPC (so none is answered), closes the
// client once half of them are on their way, and prints "returned N" once
// every request has returned, or "stuck N" when N have not returned 10 s
// after Close began. Close answers the requests before it waits for the
// connection still opening (until the connect timeout): once they have
// returned, Close's ctx ends.
func runCloseRace(string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ln.Close()
	c, err := remote.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	const raceCalls = 2000
	returned := make(chan error, raceCalls)
	gate, half := make(chan struct{}), make(chan struct{})
	var started atomic.Int64
	for range raceCalls {
		go func() {
			<-gate
			if started.Add(1) == raceCalls/2 {
				close(half)
			}
			_, err := c.Tools(context.Background(), ln.Addr().String())
			returned <- err
		}()
	}
	close(gate)
	<-half
	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan error, 1)
	go func() { closed <- c.Close(ctx) }()
	defer func() {
		cancel()
		if err := <-closed; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "close:", err)
		}
	}()
	deadline := time.After(10 * time.Second)
	for got := 0; got < raceCalls; got++ {
		select {
		case err := <-returned:
			if !errors.Is(err, remote.ErrClosed) {
				fmt.Println("error", err)
			}
		case <-deadline:
			fmt.Println("stuck", raceCalls-got)
			return 0
		}
	}
	fmt.Println("returned", raceCalls)
	return 0
}

// silentPeer accepts TCP connections and never says a word: a client
// connecting to it waits for a gRPC handshake that never comes.
type silentPeer struct {
	ln       net.Listener
	accepted chan net.Conn
	done     chan struct{}
}

func newSilentPeer() (*silentPeer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &silentPeer{ln: ln, accepted: make(chan net.Conn, 16), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted <- conn
		}
	}()
	return p, nil
}

func (p *silentPeer) addr() string { return p.ln.Addr().String() }

// close stops listening and hangs up every connection it accepted.
func (p *silentPeer) close() {
	_ = p.ln.Close()
	<-p.done
	close(p.accepted)
	for conn := range p.accepted {
		_ = conn.Close()
	}
}

// runSilentClose runs a client against a silent peer. With role "close",
// it asks the peer for its tools and, once the client's connection to
// the peer is opening, closes the client; it prints "tools ERR" (the
// DESCRIBE's, which Close answers) and, after ending Close's ctx, "close
// ERR" (Close's error). With role "timeout", the client gives up connecting after
// 50 ms; it prints "tools ERR" (the DESCRIBE's, which waits up to 15 s)
// and "close ERR" (Close's, without a deadline). Then the peer hangs up,
// and once the client's endpoint for it has stopped it prints the
// goroutines left ("leaks none" when none).
func runSilentClose(role string) int {
	switch role {
	case "caller":
		return runSilentCaller()
	case "refused":
		return runRefused()
	}
	peer, err := newSilentPeer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := &remote.ClientOptions{ConnectTimeout: time.Hour} // the peer hangs up when the test says so
	if role == "timeout" {
		opts.ConnectTimeout = 50 * time.Millisecond
	}
	c, err := remote.NewClient(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opening := remote.Opening(c)
	stopped := make(chan struct{})
	c.System().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*paremote.EndpointTerminatedEvent); ok && e.Address == peer.addr() {
			close(stopped)
		}
	})
	if role == "timeout" {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // gRPC's own bound is 20 s
		_, err := c.Tools(ctx, peer.addr())
		cancel()
		fmt.Println("tools", err)
		fmt.Println("close", oneLine(c.Close(context.Background())))
	} else {
		described := make(chan error, 1)
		go func() {
			_, err := c.Tools(context.Background(), peer.addr())
			described <- err
		}()
		<-opening
		// Close answers the DESCRIBE before it stops the connections:
		// its ctx ends while it waits for them.
		ctx, cancel := context.WithCancel(context.Background())
		closed := make(chan error, 1)
		go func() { closed <- c.Close(ctx) }()
		fmt.Println("tools", <-described)
		cancel()
		fmt.Println("close", oneLine(<-closed))
	}
	peer.close()
	<-stopped
	printLeaks()
	return 0
}

// runSilentCaller serves a node that a caller at a silent peer asks for its
// tools: the node's answers go to the caller over a connection of the
// node's own, which never opens. Once that connection is opening, the node
// closes with a ctx that has ended and prints "close ERR"; then the peer
// hangs up, and once the node's endpoint for it has stopped it prints the
// goroutines left ("leaks none" when none).
func runSilentCaller() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	peer, err := newSilentPeer()
	if err != nil {
		return fail(err)
	}
	node, err := remote.Serve(&remote.NodeOptions{Tools: nodeTools(func(string) {}), ConnectTimeout: time.Hour})
	if err != nil {
		return fail(err)
	}
	opening := remote.NodeOpening(node)
	stopped := make(chan struct{})
	node.System().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*paremote.EndpointTerminatedEvent); ok && e.Address == peer.addr() {
			close(stopped)
		}
	})
	conn, err := grpc.NewClient(node.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fail(err)
	}
	stream, err := paremote.NewRemotingClient(conn).Receive(context.Background())
	if err != nil {
		return fail(err)
	}
	describe, err := proto.Marshal(messages.Describe("s"))
	if err != nil {
		return fail(err)
	}
	for _, m := range []*paremote.RemoteMessage{
		{MessageType: &paremote.RemoteMessage_ConnectRequest{ConnectRequest: &paremote.ConnectRequest{
			ConnectionType: &paremote.ConnectRequest_ServerConnection{ServerConnection: &paremote.ServerConnection{
				SystemId: "caller", Address: peer.addr()}}}}},
		{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: &paremote.MessageBatch{
			TypeNames: []string{"polyweave.v1.Frame"},
			Targets:   []*actor.PID{actor.NewPID(node.Address(), remote.ServiceName)},
			Senders:   []*actor.PID{actor.NewPID(peer.addr(), "caller")},
			Envelopes: []*paremote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 1, MessageData: describe}},
		}}},
	} {
		if err := stream.Send(m); err != nil {
			return fail(err)
		}
	}
	<-opening
	_ = stream.CloseSend()
	_ = conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println("close", oneLine(node.Close(ctx)))
	peer.close()
	<-stopped
	printLeaks()
	return 0
}

// printLeaks prints, in a child process, the goroutines left ("leaks
// none" when none).
func printLeaks() {
	if err := leakcheck.Find(); err != nil {
		fmt.Println("leaks", err)
	} else {
		fmt.Println("leaks none")
	}
}

// deadAddress returns a loopback address where nothing listens (any more).
func deadAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// refusedCalls is how many times runRefused asks a dead address for its
// tools, all within refusedBound, Close included.
const (
	refusedCalls = 3
	refusedBound = 3 * time.Second
)

// runRefused runs a client that asks an address where nothing listens for
// its tools refusedCalls times, then closes, all under one ctx of
// refusedBound: it prints "tools ERR" for each DESCRIBE, "close ERR"
// (Close's), then the goroutines left ("leaks none" when none).
func runRefused() int {
	dead, err := deadAddress()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := remote.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), refusedBound)
	defer cancel()
	for range refusedCalls {
		_, err := c.Tools(ctx, dead)
		fmt.Println("tools", err)
	}
	fmt.Println("close", oneLine(c.Close(ctx)))
	printLeaks()
	return 0
}

// A node that is not there is reported at once, each time it is called,
// and a Close right after a failed connection does not wait on it: the
// calls and Close all end well within one bound, where waiting out a
// retry delay after each failed connection (2 s in the pinned remote)
// would overrun it.
func TestClient_DeadNodeFailsFast(t *testing.T) {
	t.Parallel()
	p := startChild(t, envSilentClose+"=refused")
	for range refusedCalls {
		if e := p.next(t); !strings.HasPrefix(e, "tools ") || !strings.HasSuffix(e, remote.ErrNodeUnreachable.Error()) {
			t.Errorf("%s; want ErrNodeUnreachable within %v", e, refusedBound)
		}
	}
	p.want(t, "close <nil>", "%s; want Close done within %v", refusedBound)
	if e := p.next(t); e != "leaks none" {
		t.Error(e)
	}
}

// A node answering a caller that accepts TCP but never completes the
// gRPC handshake: the node's Close returns once its ctx ends, and names
// the caller it could not reach; once the caller goes nothing is left.
func TestNode_CloseHonoursCtxWhileConnecting(t *testing.T) {
	t.Parallel()
	p := startChild(t, envSilentClose+"=caller")
	closeErr := p.next(t)
	if !strings.HasPrefix(closeErr, "close ") || !strings.Contains(closeErr, context.Canceled.Error()) ||
		!strings.Contains(closeErr, "still connecting to 127.0.0.1:") {
		t.Errorf("%s; want ctx's error and the caller still connecting", closeErr)
	}
	if e := p.next(t); e != "leaks none" {
		t.Error(e)
	}
}

// oneLine is err's text on one line (a joined error has several).
func oneLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// A client connecting to a peer that accepts TCP but never completes the
// gRPC handshake: Close returns once its ctx ends, and says which peer it
// could not hang up on; the requests are answered all the same, and once
// the peer goes nothing is left behind.
func TestClient_CloseHonoursCtxWhileConnecting(t *testing.T) {
	t.Parallel()
	p := startChild(t, envSilentClose+"=close")
	if e := p.next(t); !strings.HasPrefix(e, "tools ") || !strings.HasSuffix(e, remote.ErrClosed.Error()) {
		t.Errorf("%s; want the DESCRIBE answered with ErrClosed", e)
	}
	closeErr := p.next(t)
	if !strings.HasSuffix(closeErr, context.Canceled.Error()) || !strings.Contains(closeErr, "still connecting to 127.0.0.1:") {
		t.Errorf("%s; want ctx's error and the peer still connecting", closeErr)
	}
	if e := p.next(t); e != "leaks none" {
		t.Error(e)
	}
}

// A peer that accepts TCP but never completes the gRPC handshake is given
// up after ClientOptions.ConnectTimeout: requests to it are answered with
// ErrNodeUnreachable, and Close does not wait for it.
func TestClient_ConnectTimeout(t *testing.T) {
	t.Parallel()
	p := startChild(t, envSilentClose+"=timeout")
	if e := p.next(t); !strings.HasPrefix(e, "tools ") || !strings.HasSuffix(e, remote.ErrNodeUnreachable.Error()) {
		t.Errorf("%s; want ErrNodeUnreachable once the connect timeout passed", e)
	}
	if e := p.next(t); e != "close <nil>" {
		t.Error(e)
	}
	if e := p.next(t); e != "leaks none" {
		t.Error(e)
	}
}

// Close answers every call and DESCRIBE with ErrClosed, however it races
// with them: none is left waiting, not even one whose request was still
// on its way to the client's actor when Close stopped it.
func TestClient_CloseAnswersEveryRequest(t *testing.T) {
	t.Parallel()
	p := startChild(t, envCloseRace+"=1")
	for {
		e := p.next(t)
		if e == "returned 2000" {
			break
		}
		t.Error(e)
		if e[:5] == "stuck" {
			break
		}
	}
}

// startCall starts a node and a client process that calls hold on it, and
// waits until the call runs on the node.
func startCall(t *testing.T) (node, client *nodeProc) {
	t.Helper()
	node = startNode(t, remote.DefaultAddress)
	client = startChild(t, envClient+"="+node.addr)
	if e := client.next(t); e != "calling" {
		t.Fatalf("client said %q", e)
	}
	if e := node.next(t); e != "started c" {
		t.Fatalf("node event %q", e)
	}
	return node, client
}

// A client that closes with a call in flight cancels the call on the node:
// the handler's context is cancelled, the work stops.
func TestClient_CloseCancelsCallsOnTheNode(t *testing.T) {
	t.Parallel()
	node, client := startCall(t)
	client.send(t, "close")
	client.want(t, "closed <nil>", "client said %q")
	client.want(t, "call "+remote.ErrClosed.Error(), "client said %q, want the call answered with ErrClosed")
	node.want(t, "cancelled c", "node event %q, want the handler cancelled")
	client.stop()
	node.stop()
}

// A node whose connection to a caller ends while the caller is still
// there (its connection to the node open) cancels the caller's call and
// tells the caller, over a new connection: the call, which has no
// timeout, is answered with ErrConnectionLost at once, rather than after
// the client's CallTimeout.
func TestNode_ConnectionToCallerLostTellsTheCaller(t *testing.T) {
	t.Parallel()
	node, client := startCall(t)
	client.send(t, "end")
	node.want(t, "cancelled c", "node event %q, want the handler cancelled")
	if e := client.next(t); !strings.HasPrefix(e, "call ") || !strings.HasSuffix(e, remote.ErrConnectionLost.Error()) {
		t.Errorf("client said %q, want the call answered with ErrConnectionLost", e)
	}
	client.stop()
	node.stop()
}

// A client process that dies mid-call (SIGKILL: no CANCEL, no goodbye):
// the node sees its connection go, cancels the call and forgets its route.
func TestNode_CallerKilledCancelsItsCalls(t *testing.T) {
	t.Parallel()
	node, client := startCall(t)
	client.kill()
	if e := node.next(t); e != "cancelled c" {
		t.Fatalf("node event %q, want the handler cancelled", e)
	}
	node.send(t, "routes")
	node.want(t, "routes 0", "node: %q after its caller died, want no route left")
	node.stop()
}
