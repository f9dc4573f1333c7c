package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// A node listening on every interface calls itself [::]:PORT and names
// itself so in the connection it opens to the client; the client reached
// it at 127.0.0.1:PORT. A result lost with that connection is still
// answered at once with ErrConnectionLost (at the node's sign of life),
// rather than at the call's timeout (10 min for a tool without one).
func TestClient_NodeOnEveryInterface_ResultLostIsAnswered(t *testing.T) {
	client, _ := setup(t)
	node := startChild(t, envEveryInterface+"=0.0.0.0:0")
	said := node.next(t)
	self, ok := strings.CutPrefix(said, "listening ")
	if !ok {
		t.Fatalf("node said %q", said)
	}
	node.addr = withHost(t, self, "127.0.0.1")
	ts := remoteTools(t, client, node.addr)
	if _, err := ts["echo"].Definition().Handler(t.Context(), json.RawMessage(`{"text":"first"}`)); err != nil {
		t.Fatal(err)
	}
	if e := node.next(t); e != "echo first" {
		t.Fatalf("node event %q", e)
	}
	remote.EndIncoming(client.Client)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := ts["echo"].Definition().Handler(ctx, json.RawMessage(`{"text":"lost"}`))
	if e := node.next(t); e != "echo lost" {
		t.Errorf("node event %q, want the call run", e)
	}
	if !errors.Is(err, remote.ErrConnectionLost) {
		t.Errorf("node calling itself %s, reached at %s: result lost with the connection answered %v, want ErrConnectionLost", self, node.addr, err)
	}
	// The node is sure again: a call is answered by its result.
	if out, err := ts["echo"].Definition().Handler(ctx, json.RawMessage(`{"text":"after"}`)); err != nil || !strings.Contains(fmt.Sprintf("%s", out), "after") {
		t.Errorf("call after the node's sign of life: %s, %v", out, err)
	}
	if e := node.next(t); e != "echo after" {
		t.Errorf("node event %q", e)
	}
	node.stopSeen(t, client)
}
