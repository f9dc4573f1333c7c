package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// TestClient_CutOffByTheNodeSaysWhy: a node that closes a client's
// connection (here: a call's message over what the node's connection may
// hold of messages not yet whole) tells why in its GOAWAY, and the
// client's call says it: ErrNodeUnreachable, naming the node's reason,
// not the bare "tool node unreachable".
func TestClient_CutOffByTheNodeSaysWhy(t *testing.T) {
	const budget = 256 << 10
	client, _ := setup(t)
	node := startLimitsNode(t, 0, budget, 0, 0)
	ts := remoteTools(t, client, node.addr)
	args := json.RawMessage(`{"text":"` + strings.Repeat("z", 2*budget) + `"}`)
	// Only a failing client makes the test wait this long.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, err := ts["echo"].Definition().Handler(ctx, args)
	if !errors.Is(err, remote.ErrNodeUnreachable) {
		t.Fatalf("a call over the node's connection budget: %v, want %v", err, remote.ErrNodeUnreachable)
	}
	if !strings.Contains(err.Error(), "not yet whole") || !strings.Contains(err.Error(), "ENHANCE_YOUR_CALM") {
		t.Errorf("a call over the node's connection budget: %q, want the node's reason (its GOAWAY's)", err)
	}
	node.waitGone(t, client)
}
