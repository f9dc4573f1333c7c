package remote_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	paremote "github.com/asynkron/protoactor-go/remote"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/tlstest"
	"github.com/polyweave/polyweave-go/tools"
)

// envTLS makes this test binary a peer with mutual TLS (see runTLSPeer).
// It is read in init, before TestMain starts the shared client: a process
// should run one protoactor remote.
const envTLS = "POLYWEAVE_REMOTE_TEST_TLS"

func init() {
	if v := os.Getenv(envTLS); v != "" {
		os.Exit(runTLSPeer(v))
	}
}

// runTLSPeer runs a node or a client, as v says: "node CERT KEY CA" or
// "client CERT KEY CA", with the TLS of those files ("-" for each: no
// TLS). Both await a ping's answer for frozenPingTimeout. It prints its
// lines on stdout:
//
//   - a node serves nodeTools, prints "listening ADDR" and then the tools'
//     events; a line "dials" on stdin prints "dials N", the connections
//     the node began to open to its callers;
//   - a client obeys the lines on stdin: "call ADDR TOOL ARGS" calls tool
//     TOOL of the node at ADDR with the JSON ARGS and prints "result
//     PAYLOAD", or "error unreachable=BOOL ERR" (whether the error wraps
//     ErrNodeUnreachable); "dials" prints "dials N" as a node does. It
//     prints "gone ADDR" for each node it reports gone.
//
// When stdin closes, it closes and prints "close ERR", then the
// goroutines left ("leaks none" when none).
func runTLSPeer(v string) int {
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	fields := strings.Fields(v)
	if len(fields) != 4 {
		fmt.Fprintf(os.Stderr, "%s=%q: want ROLE CERT KEY CA\n", envTLS, v)
		return 1
	}
	var tlsOpts *remote.TLS
	if fields[1] != "-" {
		var err error
		if tlsOpts, err = remote.LoadTLS(fields[1], fields[2], fields[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var opening <-chan string
	var closeFn func(context.Context) error
	var call func(addr, tool, args string)
	switch fields[0] {
	case "node":
		node, err := remote.Serve(&remote.NodeOptions{Tools: nodeTools(func(e string) { say("%s", e) }), TLS: tlsOpts,
			KeepaliveTimeout: frozenPingTimeout})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opening, closeFn = remote.NodeOpening(node), node.Close
		say("listening %s", node.Address())
	case "client":
		c, err := remote.NewClient(&remote.ClientOptions{TLS: tlsOpts, KeepaliveTimeout: frozenPingTimeout,
			OnNodeGone: func(addr string) { say("gone %s", addr) }})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opening, closeFn = remote.Opening(c), c.Close
		call = func(addr, tool, args string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := callOnce(ctx, c, addr, tool, args)
			if err != nil {
				say("error unreachable=%t %s", errors.Is(err, remote.ErrNodeUnreachable), oneLine(err))
				return
			}
			say("result %s", res)
		}
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: no role %q\n", envTLS, v, fields[0])
		return 1
	}
	dials := 0
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd := strings.SplitN(sc.Text(), " ", 4)
		switch {
		case cmd[0] == "dials":
			for len(opening) > 0 {
				<-opening
				dials++
			}
			say("dials %d", dials)
		case cmd[0] == "call" && len(cmd) == 4 && call != nil:
			call(cmd[1], cmd[2], cmd[3])
		default:
			fmt.Fprintf(os.Stderr, "unknown command %q\n", sc.Text())
			return 1
		}
	}
	say("close %s", oneLine(closeFn(context.Background())))
	if err := leakcheck.Find(); err != nil {
		say("leaks %s", oneLine(err))
	} else {
		say("leaks none")
	}
	return 0
}

// callOnce asks the node at addr for its tools and calls tool with args
// (JSON) over the wire, returning its result.
func callOnce(ctx context.Context, c *remote.Client, addr, tool, args string) (json.RawMessage, error) {
	ts, err := c.Tools(ctx, addr)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name() == tool {
			out, err := t.Definition().Handler(ctx, json.RawMessage(args))
			if err != nil {
				return nil, err
			}
			return out.(json.RawMessage), nil
		}
	}
	return nil, fmt.Errorf("node %s has no tool %s", addr, tool)
}

// startTLSPeer starts a peer of runTLSPeer with the TLS of files (nil: no
// TLS) and, for a node, waits until it serves and sets its address.
func startTLSPeer(t *testing.T, role string, files *tlstest.Files) *nodeProc {
	t.Helper()
	args := role + " - - -"
	if files != nil {
		args = strings.Join([]string{role, files.Cert, files.Key, files.CA}, " ")
	}
	p := startChild(t, envTLS+"="+args)
	if role == "node" {
		first := p.next(t)
		addr, ok := strings.CutPrefix(first, "listening ")
		if !ok {
			t.Fatalf("TLS node said %q", first)
		}
		p.addr = addr
	}
	return p
}

// startTLSPair starts a node and a client with certificates from one CA.
func startTLSPair(t *testing.T) (node, client *nodeProc) {
	t.Helper()
	ca := tlstest.NewCA(t, "polyweave test CA")
	dir := t.TempDir()
	node = startTLSPeer(t, "node", new(ca.WriteFiles(t, dir, "node")))
	client = startTLSPeer(t, "client", new(ca.WriteFiles(t, dir, "client")))
	return node, client
}

// send writes line to the peer's stdin.
func (p *nodeProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(p.stdin, line); err != nil {
		t.Fatal(err)
	}
}

// reply returns the peer's next line that does not report a node gone.
func (p *nodeProc) reply(t *testing.T) string {
	t.Helper()
	for {
		if e := p.next(t); !strings.HasPrefix(e, "gone ") {
			return e
		}
	}
}

// stopClean stops the peer and checks that it closed cleanly, with no
// goroutine left, and that it printed nothing else first (a node: no tool
// ran).
func (p *nodeProc) stopClean(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	for _, want := range []string{"close <nil>", "leaks none"} {
		if e := p.reply(t); e != want {
			t.Errorf("peer said %q, want %q", e, want)
		}
	}
	<-p.done
}

// A client with a certificate from the CAs a node trusts runs calls on
// the node over mutual TLS, and gets their results back (over the node's
// own connection to it, which checks the client's certificate in turn).
func TestTLS_ClientCallsNode(t *testing.T) {
	t.Parallel()
	node, client := startTLSPair(t)
	echoes(t, client, node, "over TLS")
	client.stopClean(t)
	node.stopClean(t)
}

// echoes has client call node's echo tool with text, and checks that the
// result comes back, the client reporting nothing else first (no node
// gone), and that the node ran the call.
func echoes(t *testing.T, client, node *nodeProc, text string) {
	t.Helper()
	client.send(t, "call "+node.addr+` echo {"text":"`+text+`"}`)
	if r := client.next(t); r != `result {"echo":"`+text+`"}` {
		t.Fatalf("the TLS client's call of echo %q: %s", text, r)
	}
	if e := node.next(t); e != "echo "+text {
		t.Fatalf("node event %q, want echo %s", e, text)
	}
}

// A node and a client with mutual TLS ping their quiet connections as
// without TLS, and find each other alive: after the connections stayed
// quiet past the keepalive time (and the answer's timeout), a call runs
// over the same connections, neither side having dialled again or
// reported the other gone.
func TestTLS_PingsSeeNodeAlive(t *testing.T) {
	t.Parallel()
	node, client := startTLSPair(t)
	for _, text := range []string{"before", "after"} {
		if text == "after" {
			// The quiet time under test (gRPC pings a connection quiet
			// for 10 s at the soonest), not a wait for actors.
			time.Sleep(remote.DefaultKeepaliveTime + frozenPingTimeout + 2*time.Second)
		}
		echoes(t, client, node, text)
	}
	for _, p := range []*nodeProc{client, node} {
		p.send(t, "dials")
		if r := p.next(t); r != "dials 1" {
			t.Errorf("%s, want one connection opened (none lost to a ping)", r)
		}
	}
	client.stopClean(t)
	node.stopClean(t)
}

// A client whose certificate does not chain to a node's CAs cannot reach
// it, and neither can a client that does not trust the node's
// certificate, or a client with TLS a node without: each call is answered
// at once with ErrNodeUnreachable, naming the TLS failure, and the node
// runs nothing.
func TestTLS_RefusesUntrustedPeers(t *testing.T) {
	t.Parallel()
	ca, other := tlstest.NewCA(t, "polyweave test CA"), tlstest.NewCA(t, "another CA")
	dir := t.TempDir()
	node := startTLSPeer(t, "node", new(ca.WriteFiles(t, dir, "node")))
	strangerNode := startTLSPeer(t, "node", new(other.WriteFiles(t, dir, "stranger-node")))
	plainNode := startNode(t, remote.DefaultAddress)
	// Its own certificate from another CA; it trusts the node's.
	stranger := startTLSPeer(t, "client", new(other.WriteFiles(t, dir, "stranger", ca)))
	client := startTLSPeer(t, "client", new(ca.WriteFiles(t, dir, "client")))
	for _, c := range []struct {
		name   string
		client *nodeProc
		node   string
		want   string
	}{
		{"a client with a certificate from another CA", stranger, node.addr, "the client's certificate must chain to the node's CAs"},
		{"a node with a certificate from another CA", client, strangerNode.addr, "x509: certificate signed by unknown authority"},
		{"a node without TLS", client, plainNode.addr, "tls: first record does not look like a TLS handshake"},
	} {
		c.client.send(t, "call "+c.node+` echo {"text":"refused"}`)
		r := c.client.reply(t)
		t.Logf("%s: %s", c.name, r)
		if !strings.HasPrefix(r, "error unreachable=true ") || !strings.Contains(r, c.want) {
			t.Errorf("%s: %s; want ErrNodeUnreachable naming %q", c.name, r, c.want)
		}
	}
	stranger.stopClean(t)
	client.stopClean(t)
	node.stopClean(t)
	strangerNode.stopClean(t)
	plainNode.stop()
	if e := plainNode.next(t); e != "dropped 0" {
		t.Errorf("the node without TLS: event %q, want nothing run", e)
	}
}

// A peer that reaches a TLS node without a certificate, or with one from
// another CA, has its connection refused at the TLS handshake, with an
// error that says so, before the node reads anything: a call it sends
// does not run. The same call from a peer with a good certificate runs.
func TestTLS_NodeRefusesPeerWithoutCertificate(t *testing.T) {
	before := goleak.IgnoreCurrent()
	defer func() { leakcheck.VerifyNone(t, append([]goleak.Option{before}, clientConnections...)...) }()
	ca, other := tlstest.NewCA(t, "polyweave test CA"), tlstest.NewCA(t, "another CA")
	node := startTLSPeer(t, "node", new(ca.WriteFiles(t, t.TempDir(), "node")))
	for _, c := range []struct {
		name  string
		certs []tls.Certificate
		want  string
	}{
		{"no certificate", nil, "tls: "},
		{"a certificate from another CA", []tls.Certificate{other.Issue(t, "stranger")}, "tls: "},
		{"a good certificate", []tls.Certificate{ca.Issue(t, "peer")}, ""},
	} {
		// TLS 1.2, as nodes and clients dial: the refusal comes in the
		// handshake.
		err := rawCall(t, node.addr, &tls.Config{Certificates: c.certs, RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12}, c.name)
		t.Logf("%s: %v", c.name, err)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want the connection refused (%q)", c.name, err, c.want)
		}
	}
	// The events come in order: only the call with a good certificate ran.
	if e := node.next(t); e != "echo a good certificate" {
		t.Errorf("node event %q, want the call with a good certificate run, and it alone", e)
	}
	node.stopClean(t)
}

// rawCall connects to the node at addr over gRPC with cfg, as
// protoactor's remote would (a connect request, then a batch), and sends
// the node an echo call of text. It returns the error that ends the
// connection before the node's answer to the connect request, nil when
// that answer came and the call went out.
func rawCall(t *testing.T, addr string, cfg *tls.Config, text string) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := paremote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = stream.CloseSend() }()
	// A failed Send says only that the stream ended: Recv says why.
	_ = stream.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_ConnectRequest{
		ConnectRequest: &paremote.ConnectRequest{ConnectionType: &paremote.ConnectRequest_ServerConnection{
			ServerConnection: &paremote.ServerConnection{SystemId: "raw", Address: "127.0.0.1:1"}}}}})
	if _, err := stream.Recv(); err != nil {
		return err
	}
	call := messages.ToolCall("s", "c", "echo", json.RawMessage(fmt.Sprintf(`{"text":%q}`, text)))
	if err := stream.Send(&paremote.RemoteMessage{MessageType: &paremote.RemoteMessage_MessageBatch{MessageBatch: &paremote.MessageBatch{
		TypeNames: []string{"polyweave.v1.Frame"},
		Targets:   []*actor.PID{actor.NewPID(addr, remote.ServiceName)},
		Senders:   []*actor.PID{actor.NewPID("127.0.0.1:1", "raw")},
		Envelopes: []*paremote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 1, MessageData: mustMarshal(t, call)}},
	}}}); err != nil {
		return err
	}
	// The node ends the stream once it has read the batch and then the
	// end of this side: returning (cancelling the stream) right after
	// Send could abort it before the batch left.
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// A client without TLS (the shared one) cannot reach a TLS node: its
// request is answered at once with ErrNodeUnreachable, not held until its
// ctx ends, and the node runs nothing.
func TestTLS_PlainClientFailsAtOnce(t *testing.T) {
	client, _ := setup(t)
	ca := tlstest.NewCA(t, "polyweave test CA")
	node := startTLSPeer(t, "node", new(ca.WriteFiles(t, t.TempDir(), "node")))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := client.Tools(ctx, node.addr)
	if !errors.Is(err, remote.ErrNodeUnreachable) || ctx.Err() != nil || !strings.Contains(err.Error(), "ClientOptions.TLS") {
		t.Errorf("a plain client asking a TLS node for its tools: %v; want ErrNodeUnreachable at once, pointing to ClientOptions.TLS", err)
	}
	node.stopClean(t)
	node.waitGone(t, client)
}

// A node or client refuses a TLS it cannot use, with ErrTLSConfig, before
// it listens: no certificate, a certificate without its key, no CAs.
func TestTLS_RefusesBadConfig(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ca := tlstest.NewCA(t, "polyweave test CA")
	good := ca.Issue(t, "peer")
	noKey := good
	noKey.PrivateKey = nil
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	for name, bad := range map[string]*remote.TLS{
		"no certificate":                {CAs: ca.Pool()},
		"a certificate without its key": {Certificate: noKey, CAs: ca.Pool()},
		"no CAs":                        {Certificate: good},
	} {
		if node, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{echo}, TLS: bad}); !errors.Is(err, remote.ErrTLSConfig) || !strings.Contains(err.Error(), "NodeOptions.TLS") {
			t.Errorf("a node with %s: %v, want ErrTLSConfig naming NodeOptions.TLS", name, err)
			if node != nil {
				_ = node.Close(context.Background())
			}
		}
		if c, err := remote.NewClient(&remote.ClientOptions{TLS: bad}); !errors.Is(err, remote.ErrTLSConfig) || !strings.Contains(err.Error(), "ClientOptions.TLS") {
			t.Errorf("a client with %s: %v, want ErrTLSConfig naming ClientOptions.TLS", name, err)
			if c != nil {
				_ = c.Close(context.Background())
			}
		}
	}
	dir := t.TempDir()
	files := ca.WriteFiles(t, dir, "peer")
	if _, err := remote.LoadTLS(files.Cert, files.Key, files.Cert+".missing"); !errors.Is(err, remote.ErrTLSConfig) {
		t.Errorf("LoadTLS of a missing CA file: %v, want ErrTLSConfig", err)
	}
	if _, err := remote.LoadTLS(files.Cert, files.Key, files.Key); !errors.Is(err, remote.ErrTLSConfig) {
		t.Errorf("LoadTLS of a CA file without a certificate: %v, want ErrTLSConfig", err)
	}
	leakcheck.VerifyNone(t, before)
}

// With TLS, a node and a client still listen on loopback only unless
// AllowRemote; the refusal no longer says that anyone reaching them runs
// tools (their peers need a certificate).
func TestTLS_StillLoopbackUnlessAllowed(t *testing.T) {
	ca := tlstest.NewCA(t, "polyweave test CA")
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	refusesBeyondLoopback(t, "NodeOptions.AllowRemote", func(addr string) (string, func(), error) {
		node, err := remote.Serve(&remote.NodeOptions{Address: addr, Tools: []*tools.Tool{echo}, TLS: ca.TLS(t, "node")})
		if err != nil {
			if strings.Contains(err.Error(), "whoever") {
				t.Errorf("a TLS node's refusal says anyone could reach it: %v", err)
			}
			return "", nil, err
		}
		return node.Address(), func() { _ = node.Close(context.Background()) }, nil
	})
	refusesBeyondLoopback(t, "ClientOptions.AllowRemote", func(addr string) (string, func(), error) {
		c, err := remote.NewClient(&remote.ClientOptions{Address: addr, TLS: ca.TLS(t, "client")})
		if err != nil {
			if strings.Contains(err.Error(), "whoever") {
				t.Errorf("a TLS client's refusal says anyone could reach it: %v", err)
			}
			return "", nil, err
		}
		return c.Address(), func() { _ = c.Close(context.Background()) }, nil
	})
}
