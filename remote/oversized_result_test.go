package remote_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// envBigNode: serve, at this address, with a frame limit of
// bigNodeMaxFrame, "hold" (as nodeTools' hold) and "big", whose result is
// {"big": N bytes} for {"n": N} (other arguments ignored), with a 10 s
// timeout. It prints its events as runTestNode does, and answers
// "routes" on stdin so too.
const envBigNode = "POLYWEAVE_REMOTE_TEST_BIG_NODE"

// bigNodeMaxFrame is the frame limit of the envBigNode node: below the
// client's (DefaultMaxFrameBytes).
const bigNodeMaxFrame = 1 << 20

func runBigNode(addr string) int {
	var mu sync.Mutex
	events := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(e)
	}
	var hold *tools.Tool
	for _, tool := range nodeTools(events) {
		if tool.Name() == "hold" {
			hold = tool
		}
	}
	big := tools.MustNew(tools.Definition{Name: "big", Timeout: 10 * time.Second, Handler: func(_ context.Context, args json.RawMessage) (any, error) {
		var in struct {
			N int `json:"n"`
		}
		_ = json.Unmarshal(args, &in)
		events(fmt.Sprint("big ", in.N))
		return map[string]string{"big": strings.Repeat("z", in.N)}, nil
	}})
	node, err := remote.Serve(&remote.NodeOptions{Address: addr, Tools: []*tools.Tool{hold, big}, MaxFrameBytes: bigNodeMaxFrame})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	events("listening " + node.Address())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "routes" {
			events(fmt.Sprint("routes ", remote.Routes(node)))
		}
	}
	if err := node.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startBigNode starts an envBigNode node and returns it with its tools.
func startBigNode(t *testing.T, client *host) (*nodeProc, map[string]*tools.Tool) {
	t.Helper()
	node := startChild(t, envBigNode+"="+remote.DefaultAddress)
	first := node.next(t)
	addr, ok := strings.CutPrefix(first, "listening ")
	if !ok {
		t.Fatalf("node said %q", first)
	}
	node.addr = addr
	return node, remoteTools(t, client, addr)
}

// routes asks node how many calls it routes results for, and returns its
// answer with the events it printed before it.
func (p *nodeProc) routes(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := p.stdin.Write([]byte("routes\n")); err != nil {
		t.Fatal(err)
	}
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
	hold, err := rt.Start(ts["hold"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	bigc, err := rt.Start(ts["big"].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Send(messages.ToolCall("s", "h1", "hold", json.RawMessage(`{"id":"h1"}`))); err != nil {
		t.Fatal(err)
	}
	if e := node.next(t); e != "started h1" {
		t.Fatalf("node event %q", e)
	}
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
