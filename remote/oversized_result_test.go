package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// envBigNode: serve, at this address, with a frame limit of
// bigNodeMaxFrame, "hold" (as nodeTools' hold) and "big", whose result is
// {"big": N bytes} for {"n": N} (other arguments ignored), with a 60 s
// timeout: far beyond the time a too-large answer takes even under the
// race detector on a busy machine (a 10 s one was passed there), so that
// a call answered by its timeout, not by the size check, is told apart.
// It prints its events as runTestNode does, and answers "routes" on stdin
// so too.
const envBigNode = "POLYWEAVE_REMOTE_TEST_BIG_NODE"

// bigNodeMaxFrame is the frame limit of the envBigNode node: below the
// client's (DefaultMaxFrameBytes).
const bigNodeMaxFrame = 1 << 20

func runBigNode(addr string) int {
	events := eventPrinter()
	var hold *tools.Tool
	for _, tool := range nodeTools(events) {
		if tool.Name() == "hold" {
			hold = tool
		}
	}
	big := tools.MustNew(tools.Definition{Name: "big", Timeout: 60 * time.Second, Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		var in struct {
			N int `json:"n"`
		}
		_ = json.Unmarshal(args, &in)
		events(fmt.Sprint("big ", in.N))
		return map[string]string{"big": strings.Repeat("z", in.N)}, nil
	}})
	node := listen(&remote.NodeOptions{Address: addr, Tools: []*tools.Tool{hold, big}, MaxFrameBytes: bigNodeMaxFrame}, events)
	if node == nil {
		return 1
	}
	readCommands(node, events, nil)
	return closeNode(node)
}

// startBigNode starts an envBigNode node and returns it with its tools.
func startBigNode(t *testing.T, client *host) (*nodeProc, map[string]*tools.Tool) {
	t.Helper()
	node := startListening(t, envBigNode+"="+remote.DefaultAddress)
	return node, remoteTools(t, client, node.addr)
}

// holding starts ts's "hold" and the tool named other in rt, calls hold
// (call h1) and waits until node says it started; it returns the
// connections to both tools.
func holding(t *testing.T, rt *actors.Runtime, node *nodeProc, ts map[string]*tools.Tool, other string) (hold, conn *actors.Conn) {
	t.Helper()
	hold, err := rt.Start(ts["hold"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if conn, err = rt.Start(ts[other].Spec()); err != nil {
		t.Fatal(err)
	}
	if err := hold.Send(messages.ToolCall("s", "h1", "hold", json.RawMessage(`{"id":"h1"}`))); err != nil {
		t.Fatal(err)
	}
	if e := node.next(t); e != "started h1" {
		t.Fatalf("node event %q", e)
	}
	return hold, conn
}

// routes asks node how many calls it routes results for, and returns its
// answer with the events it printed before it.
func (p *nodeProc) routes(t *testing.T) (string, []string) {
	t.Helper()
	p.send(t, "routes")
	var before []string
	for e := p.next(t); ; e = p.next(t) {
		if strings.HasPrefix(e, "routes ") {
			return e, before
		}
		before = append(before, fmt.Sprintf("%.60s", e))
	}
}

// TestNode_OversizedResult: a node's result over its frame limit is
// replaced by an error of kind KindTooLarge, which answers the call at
// once (not its timeout); the connection to the caller is not lost over
// it, so the caller's other calls on the node run on.
func TestNode_OversizedResult(t *testing.T) {
	client, rt := setup(t)
	node, ts := startBigNode(t, client)
	hold, bigc := holding(t, rt, node, ts, "big")
	start := time.Now()
	res := result(t, bigc, messages.ToolCall("s", "b1", "big", json.RawMessage(`{"n":5000000}`)))
	took := time.Since(start)
	t.Logf("big call answered after %v: %.200s", took.Round(time.Millisecond), res.GetPayload())
	if k := tools.KindOf(res); k != remote.KindTooLarge {
		t.Errorf("the big call answered %s (kind %q), want kind %q", res.GetPayload(), k, remote.KindTooLarge)
	}
	if p := string(res.GetPayload()); !strings.Contains(p, "result is too large") || !strings.Contains(p, fmt.Sprint("limit ", bigNodeMaxFrame)) {
		t.Errorf("the big call answered %s, want it to say its result is too large, and the limit", p)
	}
	// Was h1 cancelled on the node, while the client still waits on it?
	if r, events := node.routes(t); r != "routes 1" {
		t.Errorf("node: %q (after %q) while the client still waits on h1: h1 was dropped on the node", r, events)
	}
	if err := hold.Send(messages.Cancel("s", "h1")); err != nil {
		t.Fatal(err)
	}
	if res := await(t, hold, "h1"); tools.KindOf(res) != tools.FailureCancelled {
		t.Errorf("hold answered %s (kind %q), want it cancelled by its caller", res.GetPayload(), tools.KindOf(res))
	}
	node.stop()
}

// TestNode_RefusesCallOverItsLimit: a call within the client's frame
// limit but over the node's is not run there; it is answered at once
// with an error of kind KindTooLarge, which the client's handler returns
// wrapping ErrTooLarge.
func TestNode_RefusesCallOverItsLimit(t *testing.T) {
	client, _ := setup(t)
	node, ts := startBigNode(t, client)
	args := json.RawMessage(`{"n":1,"pad":"` + strings.Repeat("p", 2*bigNodeMaxFrame) + `"}`)
	_, err := ts["big"].Definition().Handler(t.Context(), args)
	var re *tools.ResultError
	if !errors.Is(err, remote.ErrTooLarge) || !errors.As(err, &re) || re.Kind != remote.KindTooLarge {
		t.Fatalf("a call over the node's limit answered %v, want a *tools.ResultError of kind %q wrapping ErrTooLarge", err, remote.KindTooLarge)
	}
	if msg := err.Error(); !strings.Contains(msg, "was not run") || !strings.Contains(msg, fmt.Sprint("limit ", bigNodeMaxFrame)) {
		t.Errorf("error %q, want it to say the call was not run, and the node's limit", msg)
	}
	if r, events := node.routes(t); r != "routes 0" || len(events) > 0 {
		t.Errorf("node: %q after %q: want no call run nor routed", r, events)
	}
	node.stop()
}
