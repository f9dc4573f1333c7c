package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// TestClient_OversizedCallLeavesOtherCallsAlone: a call whose arguments
// are over the client's frame limit is answered at once with an error of
// kind KindTooLarge and not sent; it does not make the client take its
// living node for gone: the node is not reported gone, and a call in
// flight there (hold, no timeout) is not answered ErrNodeUnreachable; a
// CANCEL of it reaches the node, so its work stops.
func TestClient_OversizedCallLeavesOtherCallsAlone(t *testing.T) {
	client, rt := setup(t)
	node := startNode(t, remote.DefaultAddress)
	ts := remoteTools(t, client, node.addr)
	hold, echo := holding(t, rt, node, ts, "echo")
	big := strings.Repeat("x", 5<<20)
	res := result(t, echo, messages.ToolCall("s", "big", "echo", json.RawMessage(`{"text":"`+big+`"}`)))
	t.Logf("oversized call answered: %.200s", res.GetPayload())
	if k := tools.KindOf(res); k != remote.KindTooLarge {
		t.Errorf("oversized call answered %.200s (kind %q), want kind %q", res.GetPayload(), k, remote.KindTooLarge)
	}
	if p := string(res.GetPayload()); !strings.Contains(p, "too large") || !strings.Contains(p, fmt.Sprint("limit ", remote.DefaultMaxFrameBytes)) {
		t.Errorf("oversized call answered %.200s, want it to say too large, and the limit", p)
	}
	select {
	case addr := <-client.gone:
		t.Errorf("node %s reported gone after an oversized call; it is alive", addr)
	default:
	}
	if err := hold.Send(messages.Cancel("s", "h1")); err != nil {
		t.Fatal(err)
	}
	if res := await(t, hold, "h1"); strings.Contains(string(res.GetPayload()), "unreachable") {
		t.Errorf("the hold call, running on a living node, answered %s", res.GetPayload())
	}
	node.want(t, "cancelled h1", "node event %q, want the hold call cancelled")
	node.stopSeen(t, client)
}

// TestClient_OversizedCallNotSent: the handler of a remote tool returns,
// for a call over the client's frame limit, a *tools.ResultError of kind
// KindTooLarge wrapping ErrTooLarge that names the size and the limit;
// the node never sees the call.
func TestClient_OversizedCallNotSent(t *testing.T) {
	client, _ := setup(t)
	node := startNode(t, remote.DefaultAddress)
	ts := remoteTools(t, client, node.addr)
	args := json.RawMessage(`{"text":"` + strings.Repeat("x", remote.DefaultMaxFrameBytes) + `"}`)
	_, err := ts["echo"].Definition().Handler(t.Context(), args)
	var re *tools.ResultError
	if !errors.Is(err, remote.ErrTooLarge) || !errors.As(err, &re) || re.Kind != remote.KindTooLarge {
		t.Fatalf("an oversized call answered %.200v, want a *tools.ResultError of kind %q wrapping ErrTooLarge", err, remote.KindTooLarge)
	}
	if msg := err.Error(); !strings.Contains(msg, "was not called") || !strings.Contains(msg, fmt.Sprint("limit ", remote.DefaultMaxFrameBytes)) {
		t.Errorf("error %q, want it to say the call was not sent, and the limit", msg)
	}
	if _, err := ts["echo"].Definition().Handler(t.Context(), json.RawMessage(`{"text":"small"}`)); err != nil {
		t.Fatalf("a small call after it: %v", err)
	}
	// The node's first call is the small one.
	node.want(t, "echo small", "node event %.60q, want the small call only")
	node.stopSeen(t, client)
}

// TestFrameLimitOption: a frame limit below 0 or over MaxFrameBytesLimit
// is refused by NewClient and Serve.
func TestFrameLimitOption(t *testing.T) {
	echo := tools.MustNew(tools.Definition{Name: "echo", Handler: func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }})
	for _, n := range []int{-1, remote.MaxFrameBytesLimit + 1} {
		if c, err := remote.NewClient(&remote.ClientOptions{MaxFrameBytes: n}); err == nil || !strings.Contains(err.Error(), "MaxFrameBytes") {
			if c != nil {
				_ = c.Close(t.Context())
			}
			t.Errorf("NewClient with MaxFrameBytes %d: %v, want an error naming the option", n, err)
		}
		if node, err := remote.Serve(&remote.NodeOptions{Tools: []*tools.Tool{echo}, MaxFrameBytes: n}); err == nil || !strings.Contains(err.Error(), "MaxFrameBytes") {
			if node != nil {
				_ = node.Close(t.Context())
			}
			t.Errorf("Serve with MaxFrameBytes %d: %v, want an error naming the option", n, err)
		}
	}
}
