//go:build unix

package remote_test

// The tests that freeze a peer with SIGSTOP, which only Unix has: its
// sockets stay open, so it stands for a peer cut off by the network.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// A call whose ctx ends while the connection to its node is still opening
// is cancelled on the node too, even when the node was gone before (and
// came back at the same address): the call went into the opening
// connection, and runs on the node once the connection opens, so its
// CANCEL must follow it there.
func TestClient_TimeoutWhileReconnectingCancelsOnTheNode(t *testing.T) {
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	addr := node.addr
	ts := remoteTools(t, client, addr)
	node.kill()
	node.waitGone(t, client) // known gone; the next call dials at once
	node = startNode(t, addr)
	// The node is frozen: the kernel still accepts TCP, but the handshake
	// hangs (well within the connect timeout) until it thaws.
	if err := node.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err := ts["hold"].Definition().Handler(ctx, json.RawMessage(`{"id":"c"}`))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call: %v, want its ctx's deadline", err)
	}
	// Once the client's actor has handled the call's end, the CANCEL it
	// sent (if any) waits in the opening connection behind the TOOL_CALL:
	// protoactor hands a message to a peer's endpoint as it is sent.
	if err := remote.Settle(client.Client); err != nil {
		t.Fatal(err)
	}
	if err := node.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if e := node.next(t); e != "started c" {
		t.Fatalf("node event %q", e)
	}
	node.want(t, "cancelled c", "node event %q, want the call cancelled")
	node.stopSeen(t, client)
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
	// keepalive time and a ping has gone unanswered (11 s, the node's
	// KeepaliveTimeout being 1 s), and never without pings.
	if e := node.nextWithin(t, pingPatience); e != "cancelled c" {
		t.Errorf("node event %q, want the handler cancelled", e)
	}
	client.kill()
	node.stop()
}
