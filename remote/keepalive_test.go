package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/remote"
)

// envFrozen: call hold on the node at this address (see runFrozen).
const envFrozen = "POLYWEAVE_REMOTE_TEST_FROZEN"

// frozenPingTimeout is how long runFrozen's client waits for the answer
// to a ping.
const frozenPingTimeout = time.Second

// pingPatience is how long the tests of pings wait for a peer to be found
// out: long past the keepalive time and timeout, on a loaded machine.
const pingPatience = time.Minute

// runFrozen runs a client, with default options but a ping timeout of
// frozenPingTimeout, that calls hold (id "c") on the node at addr and
// prints "calling"; once the call is answered it prints "call ERR". When
// stdin closes it closes the client and prints "close ERR", then the
// goroutines left ("leaks none" when none).
func runFrozen(addr string) int {
	c, err := remote.NewClient(&remote.ClientOptions{KeepaliveTimeout: frozenPingTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := c.Tools(ctx, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, tool := range ts {
		if tool.Name() == "hold" {
			fmt.Println("calling")
			_, err := tool.Definition().Handler(context.Background(), json.RawMessage(`{"id":"c"}`))
			fmt.Println("call", err)
		}
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Println("close", oneLine(c.Close(context.Background())))
	if err := leakcheck.Find(); err != nil {
		fmt.Println("leaks", err)
	} else {
		fmt.Println("leaks none")
	}
	return 0
}

// A node that stops answering without closing its connections (a frozen
// process here; a network cut does the same) is found out by the client's
// pings: its call in flight, which has no timeout, is answered with
// ErrNodeUnreachable once a ping goes unanswered, instead of never.
func TestClient_FrozenNodeIsGone(t *testing.T) {
	t.Parallel()
	node := startNode(t, remote.DefaultAddress)
	client := startChild(t, envFrozen+"="+node.addr)
	if e := client.next(t); e != "calling" {
		t.Fatalf("client said %q", e)
	}
	if e := node.next(t); e != "started c" {
		t.Fatalf("node event %q", e)
	}
	if err := node.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The answer comes once the connection has been quiet for the
	// keepalive time and a ping has gone unanswered (11 s), and never
	// without pings.
	if e := client.nextWithin(t, pingPatience); !strings.HasPrefix(e, "call ") || !strings.HasSuffix(e, remote.ErrNodeUnreachable.Error()) {
		t.Errorf("client said %q, want the call answered with ErrNodeUnreachable", e)
	}
	node.kill()
	client.stop()
	var rest []string
	for e := range client.events {
		rest = append(rest, e)
	}
	if got := strings.Join(rest, "; "); got != "close <nil>; leaks none" {
		t.Errorf("client said %q after the call, want it closed and nothing left", got)
	}
}

// A caller that stops answering without closing its connections (a frozen
// process) is found out by the node's pings: the node cancels its call,
// which has no timeout, instead of running it forever.
func TestNode_FrozenCallerIsGone(t *testing.T) {
	t.Parallel()
	node, client := startCall(t)
	if err := client.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Once the node's connection to the caller has been quiet for the
	// keepalive time and a ping has gone unanswered (15 s), and never
	// without pings.
	if e := node.nextWithin(t, pingPatience); e != "cancelled c" {
		t.Errorf("node event %q, want the handler cancelled", e)
	}
	client.kill()
	node.stop()
}
