package remote_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// TestClient_LargeCallsAtOnceStayWithinTheConnBudget: calls at once whose
// arguments, near the frame limit, add up to more than a node's
// connection may hold of messages not yet whole (one message of the
// receive limit) all reach the node and get its answer, and the node keeps the
// client's connection: protoactor sends a peer's calls on one stream of
// one connection, in batches of at most one message of the limit, and
// gRPC sends a stream's messages one after another, so at most one
// message of the client's is unfinished at a time.
func TestClient_LargeCallsAtOnceStayWithinTheConnBudget(t *testing.T) {
	const size = remote.DefaultMaxFrameBytes - 4<<10
	const calls = remote.ReceiveLimit/size + 4
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	ts := remoteTools(t, client, node.addr)
	// fail answers each call with its own error at once: the calls reach
	// it, their answers are small.
	handler := ts["fail"].Definition().Handler
	args := json.RawMessage(`{"text":"` + strings.Repeat("z", size) + `"}`)
	// Only a failing node makes the test wait this long.
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	failed := callsAtOnce(ctx, handler, calls, args, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "the disk is full")
	})
	if len(failed) > 0 {
		t.Errorf("of %d calls of %d KiB at once (%d MiB, over one connection's budget), answered otherwise than by the tool: %v", calls, size>>10, calls*size>>20, failed)
	}
	select {
	case addr := <-client.gone:
		t.Errorf("node %s reported gone during the calls; it is alive", addr)
	default:
	}
	node.stopSeen(t, client)
}
