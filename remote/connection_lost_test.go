package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/remote"
)

// envEndableNode: a test node (as runTestNode, KeepaliveTimeout 1 s, its
// logs on stderr) that takes lines on stdin: "routes" prints "routes N"
// (see Routes); "endnext" makes it end the incoming connection that
// receives the next message (see EndNextIncoming) and prints "endnext
// set"; "close" closes it with a ctx of endableCloseBound and prints
// "close ERR (took D)", then "leaks none" or what it left running.
const envEndableNode = "POLYWEAVE_REMOTE_TEST_ENDABLE_NODE"

const endableCloseBound = 2 * time.Second

func runEndableNode(addr string) int {
	events := func(e string) { fmt.Println(e) }
	node := listen(&remote.NodeOptions{Address: addr, Tools: nodeTools(events), KeepaliveTimeout: frozenPingTimeout,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}, events)
	if node == nil {
		return 1
	}
	closed := readCommands(node, events, func(line string) bool {
		switch line {
		case "endnext":
			remote.EndNextIncoming(node)
			events("endnext set")
		case "close":
			ctx, cancel := context.WithTimeout(context.Background(), endableCloseBound)
			start := time.Now()
			err := node.Close(ctx)
			cancel()
			events(fmt.Sprintf("close %s (took %v)", oneLine(err), time.Since(start).Round(10*time.Millisecond)))
			if err := leakcheck.Find(); err != nil {
				events("leaks " + oneLine(err))
			} else {
				events("leaks none")
			}
			return true
		}
		return false
	})
	if !closed {
		_ = node.Close(context.Background())
	}
	return 0
}

// startEndableNode starts a runEndableNode child and waits until it serves.
func startEndableNode(t *testing.T) *nodeProc {
	t.Helper()
	return startListening(t, envEndableNode+"="+remote.DefaultAddress)
}

// The client's connection to a node ends while the node's connection to
// the client stays (only that one connection lost): the client answers
// the call in flight with ErrNodeUnreachable at once (and sends no
// CANCEL: the call is answered), so the node cancels the calls that came
// over that connection when it ends: none runs on (a tool without a
// timeout would run for ever) while its caller, told it failed, may run
// it again.
func TestNode_CallerConnectionLostCancelsItsCalls(t *testing.T) {
	client, _ := setup(t)
	node := startEndableNode(t)
	ts := remoteTools(t, client, node.addr)
	held := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := ts["hold"].Definition().Handler(ctx, json.RawMessage(`{"id":"c"}`))
		held <- err
	}()
	if e := node.next(t); e != "started c" {
		t.Fatalf("node event %q", e)
	}
	node.send(t, "endnext")
	if e := node.next(t); e != "endnext set" {
		t.Fatalf("node said %q", e)
	}
	// The next message the node receives ends the client's connection to it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := ts["echo"].Definition().Handler(ctx, json.RawMessage(`{"text":"dropped"}`))
	t.Logf("echo over the lost connection: %v", err)
	select {
	case err := <-held:
		if !errors.Is(err, remote.ErrNodeUnreachable) {
			t.Fatalf("hold answered %v, want ErrNodeUnreachable", err)
		}
	case <-ctx.Done():
		t.Fatal("hold not answered")
	}
	// A new connection: the node serves again.
	if _, err := ts["echo"].Definition().Handler(ctx, json.RawMessage(`{"text":"again"}`)); err != nil {
		t.Fatalf("echo over a new connection: %v", err)
	}
	// The node cancels c when it sees the old connection end, which may
	// come before or after the new connection's echo: wait for both (a
	// c never cancelled fails the wait for the node's next event).
	for cancelled, again := false, false; !cancelled || !again; {
		switch e := node.next(t); e {
		case "echo again":
			again = true
		case "cancelled c":
			cancelled = true
		default:
			t.Logf("node event %q", e)
		}
	}
	node.send(t, "routes")
	node.want(t, "routes 0", "node: %q after the client answered the call with ErrNodeUnreachable: the call still runs there")
	node.stopSeen(t, client)
}

// A node that told its caller of a call cancelled when its connection to
// the caller ended (ErrConnectionLost) closes without leaving anything
// behind; the caller's call got that one answer.
func TestNode_ConnectionLostThenCloseLeavesNothing(t *testing.T) {
	client, _ := setup(t)
	node := startEndableNode(t)
	ts := remoteTools(t, client, node.addr)
	held := make(chan error, 1)
	go func() {
		_, err := ts["hold"].Definition().Handler(context.Background(), json.RawMessage(`{"id":"c"}`))
		held <- err
	}()
	if e := node.next(t); e != "started c" {
		t.Fatalf("node event %q", e)
	}
	remote.EndIncoming(client.Client)
	dctx, dcancel := context.WithTimeout(t.Context(), 3*time.Second)
	_, derr := client.Tools(dctx, node.addr) // its answers end the node's connection to the client
	dcancel()
	t.Logf("describe: %v", derr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case err := <-held:
		if !errors.Is(err, remote.ErrConnectionLost) {
			t.Errorf("hold answered %v, want ErrConnectionLost", err)
		}
	case <-ctx.Done():
		t.Fatal("hold not answered")
	}
	node.want(t, "cancelled c", "node event %q")
	node.send(t, "close")
	for _, want := range []string{"close <nil>", "leaks none"} {
		if e := node.next(t); !strings.HasPrefix(e, want) {
			t.Errorf("node said %q, want %q", e, want)
		}
	}
	node.waitGone(t, client)
}

// A call's own result lost with the node's connection to the caller (the
// node sent it, the connection ended before the caller read it): the
// node had forgotten the call when it sent the result, so its side of
// the connection's end tells the caller nothing, and the caller's
// connection to the node stays open. The client answers the call at once
// with ErrConnectionLost when that connection from the node ends, rather
// than at its timeout (10 min for a tool without one).
func TestClient_ResultLostWithTheConnectionIsAnswered(t *testing.T) {
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	ts := remoteTools(t, client, node.addr)
	// A first call: the node watches the client from now on (its watch
	// goes over the connection that carries the results).
	if _, err := ts["echo"].Definition().Handler(t.Context(), json.RawMessage(`{"text":"first"}`)); err != nil {
		t.Fatal(err)
	}
	if e := node.next(t); e != "echo first" {
		t.Fatalf("node event %q", e)
	}
	// The next message the client receives from the node is echo's result:
	// the incoming connection that carries it ends instead, as a
	// connection lost with the result in flight.
	remote.EndIncoming(client.Client)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := ts["echo"].Definition().Handler(ctx, json.RawMessage(`{"text":"lost"}`))
	node.want(t, "echo lost", "node event %q, want the call run")
	if _, werr := node.stdin.Write([]byte("routes\n")); werr != nil {
		t.Fatal(werr)
	}
	t.Logf("node after the call: %s", node.next(t))
	t.Logf("call: %v", err)
	if !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("the call ran on the node and its result was lost with the connection: answered %v, want ErrConnectionLost at once", err)
	}
	node.stopSeen(t, client)
}

// A DESCRIBE whose answer is lost with the node's connection to the
// caller is answered at once with ErrConnectionLost, rather than never
// (a ctx without a deadline) or at its ctx's end; the next one is
// answered.
func TestClient_DescribeLostWithTheConnectionIsAnswered(t *testing.T) {
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	remoteTools(t, client, node.addr) // the node's connection to the client is open
	// The next message the client receives is the DESCRIBE's answer.
	remote.EndIncoming(client.Client)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := client.Tools(ctx, node.addr); !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("describe whose answer was lost: %v, want ErrConnectionLost at once", err)
	}
	if ts := remoteTools(t, client, node.addr); len(ts) != 4 {
		t.Errorf("describe over a new connection: %d tools, want 4", len(ts))
	}
	node.stopSeen(t, client)
}
