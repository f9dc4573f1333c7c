package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// messageContext is an actor context that has a message and nothing else:
// enough for the handlers that only read it.
type messageContext struct {
	actor.Context
	msg any
}

func (c messageContext) Message() any { return c.msg }

// MessageHeader: none (a call that came over no stream).
func (messageContext) MessageHeader() actor.ReadonlyMessageHeader { return actor.EmptyMessageHeader }

// The end of a connection to a node answers what waits on that node, even
// when the node's Terminated never comes (a watch that reached the
// endpoint after its connection failed), and only that; the node's going
// is reported once.
func TestProxy_PeerGoneAnswersItsWaiters(t *testing.T) {
	const addr, other, idle = "127.0.0.1:7", "127.0.0.1:8", "127.0.0.1:9"
	var gone []string
	here := &waiter{node: actor.NewPID(addr, ServiceName), done: make(chan struct{})}
	there := &waiter{node: actor.NewPID(other, ServiceName), done: make(chan struct{})}
	p := newProxy(ClientOptions{OnNodeGone: func(a string) { gone = append(gone, a) }})
	p.watched[other] = true
	p.pending = map[callKey]*waiter{{"s", "c"}: here, {"t", "d"}: there}

	p.Receive(messageContext{msg: &peerGone{address: addr}})
	select {
	case <-here.done:
		if !errors.Is(here.err, ErrNodeUnreachable) {
			t.Errorf("call on the node whose connection ended: %v, want ErrNodeUnreachable", here.err)
		}
	default:
		t.Error("the call on the node whose connection ended still waits")
	}
	select {
	case <-there.done:
		t.Errorf("a call on another node answered: %v", there.err)
	default:
	}
	// The node's Terminated after its connection's end, and a connection
	// to a node the client neither watches nor waits on: nothing more to
	// report.
	p.Receive(messageContext{msg: &actor.Terminated{Who: actor.NewPID(addr, ServiceName)}})
	p.Receive(messageContext{msg: &peerGone{address: idle}})
	// One it watches, with nothing pending: reported, and watched again
	// at the next call.
	delete(p.pending, callKey{"t", "d"})
	p.Receive(messageContext{msg: &peerGone{address: other}})
	if want := []string{addr, other}; !slices.Equal(gone, want) {
		t.Errorf("nodes reported gone %q, want %q", gone, want)
	}
	if p.watched[other] {
		t.Error("the node whose connection ended is still taken for watched")
	}
}

// proxyContext is an actor context for the proxy: it has a message, and
// drops what the proxy sends, requests and watches.
type proxyContext struct{ messageContext }

func (proxyContext) Send(*actor.PID, any)    {}
func (proxyContext) Request(*actor.PID, any) {}
func (proxyContext) Watch(*actor.PID)        {}

// receive hands msg to p, as its actor would.
func receive(p *proxy, msg any) { p.Receive(proxyContext{messageContext{msg: msg}}) }

// A connection's end is told by its peerGone, in order with the
// connection's opening; protoactor's Terminated (AddressTerminated) for
// it comes from the connection's endpoint watcher on its own goroutine,
// possibly after a newer connection to the node has opened. Such a late
// Terminated is not a second going: the call on the newer connection
// still waits, the node is not reported again, and the newer
// connection's own end is reported.
func TestProxy_LateTerminatedOfAnEndedConnection(t *testing.T) {
	const addr = "127.0.0.1:7"
	node := actor.NewPID(addr, ServiceName)
	addressTerminated := &actor.Terminated{Who: node, Why: actor.TerminatedReason_AddressTerminated}
	gone := 0
	p := newProxy(ClientOptions{OnNodeGone: func(string) { gone++ }})
	receive(p, &peerOpened{address: addr}) // connection 1
	receive(p, &peerGone{address: addr})
	if gone != 1 {
		t.Fatalf("node reported gone %d times after its connection ended, want 1", gone)
	}
	// A call dials connection 2, which opens; then connection 1's
	// watcher tells of connection 1's end.
	w := &waiter{node: node, done: make(chan struct{})}
	receive(p, &start{frame: messages.ToolCall("s", "c", "hold", nil), w: w})
	receive(p, &peerOpened{address: addr})
	receive(p, addressTerminated)
	select {
	case <-w.done:
		t.Errorf("the call on the open connection 2 answered: %v", w.err)
	default:
	}
	if gone != 1 {
		t.Errorf("node reported gone %d times; it went once and serves again", gone)
	}
	// Connection 2 ends: its peerGone answers the call and reports the
	// going once; its own watcher's Terminated adds nothing.
	before := gone
	receive(p, &peerGone{address: addr})
	receive(p, addressTerminated)
	select {
	case <-w.done:
		if !errors.Is(w.err, ErrNodeUnreachable) {
			t.Errorf("the call on the ended connection 2: %v, want ErrNodeUnreachable", w.err)
		}
	default:
		t.Error("the call on the ended connection 2 still waits")
	}
	if gone != before+1 {
		t.Errorf("the end of connection 2 reported %d times, want once", gone-before)
	}
	// The node's service stopping (its Terminated for any other reason)
	// is a going of its own.
	w = &waiter{node: node, done: make(chan struct{})}
	receive(p, &start{frame: messages.ToolCall("s", "d", "hold", nil), w: w})
	receive(p, &peerOpened{address: addr})
	before = gone
	receive(p, &actor.Terminated{Who: node, Why: actor.TerminatedReason_Stopped})
	select {
	case <-w.done:
		if !errors.Is(w.err, ErrNodeUnreachable) {
			t.Errorf("the call on the stopped node: %v, want ErrNodeUnreachable", w.err)
		}
	default:
		t.Error("the call on the stopped node still waits")
	}
	if gone != before+1 {
		t.Errorf("the node's service stopping reported %d times, want once", gone-before)
	}
}

// holdNode is a node whose one tool, hold, runs until it is cancelled,
// with watched as its watched callers; started has each call's
// arguments once its handler runs.
func holdNode(t *testing.T, watched ...*actor.PID) (n *Node, conn *actors.Conn, started <-chan string) {
	t.Helper()
	rt := actorstest.NewRuntime(t, nil)
	ch := make(chan string, 8)
	hold := tools.MustNew(tools.Definition{Name: "hold", Timeout: tools.NoTimeout, Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
		ch <- string(args)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	conn, err := rt.Start(hold.Spec())
	if err != nil {
		t.Fatal(err)
	}
	callers := map[string]*actor.PID{}
	for _, pid := range watched {
		callers[pid.String()] = pid
	}
	n = &Node{rt: rt, log: slog.New(slog.DiscardHandler), conns: map[string]*actors.Conn{"hold": conn}, callers: callers, maxFrame: DefaultMaxFrameBytes, loads: newLoads(0)}
	return n, conn, ch
}

// The end of a connection to callers cancels their calls on the node, even
// when their Terminated never comes, and only theirs.
func TestNode_PeerGoneCancelsItsCallersCalls(t *testing.T) {
	gone, stays := actor.NewPID("127.0.0.1:7", "caller"), actor.NewPID("127.0.0.1:8", "caller")
	n, conn, started := holdNode(t, gone, stays)
	for _, c := range []struct {
		id     string
		caller *actor.PID
	}{{"c1", gone}, {"c2", stays}} {
		n.routes.Store(callKey{c.id, c.id}, route{to: c.caller, tool: "hold"})
		if err := conn.Send(messages.ToolCall(c.id, c.id, "hold", json.RawMessage(`{"id":"`+c.id+`"}`))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %s did not start", c.id)
		}
	}

	n.receive(messageContext{msg: &peerGone{address: gone.Address}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f, err := conn.Recv(ctx)
	if err != nil {
		t.Fatalf("waiting for the cancelled call's result: %v", err)
	}
	if f.GetToolCallId() != "c1" || tools.KindOf(f) != tools.FailureCancelled {
		t.Errorf("result %s of %s, want c1 cancelled", f.GetPayload(), f.GetToolCallId())
	}
	if _, ok := n.routes.Load(callKey{"c2", "c2"}); !ok || Routes(n) != 1 {
		t.Errorf("routes left: %d; want only the other caller's call", Routes(n))
	}
	if n.callers[gone.String()] != nil || n.callers[stays.String()] == nil {
		t.Errorf("callers watched: %v; want only the other caller", n.callers)
	}
	if err := conn.Close(ctx); err != nil {
		t.Error(err)
	}
}

// nodeContext is an actor context for the node's service actor: it has a
// message from sender, and drops what the service sends and watches.
type nodeContext struct {
	messageContext
	sender *actor.PID
}

func (c nodeContext) Sender() *actor.PID { return c.sender }
func (nodeContext) Send(*actor.PID, any) {}
func (nodeContext) Watch(*actor.PID)     {}

// A connection's end to a caller is told by its peerGone, in order with
// the calls that came before it; protoactor's Terminated
// (AddressTerminated) for it comes from the connection's endpoint watcher
// on its own goroutine, possibly after the caller has called again (and
// a newer connection to it opened). Such a late Terminated cancels none of
// the caller's newer calls; the newer connection's end does, once; and the
// caller's actor stopping still cancels its calls.
func TestNode_LateTerminatedOfAnEndedConnection(t *testing.T) {
	caller := actor.NewPID("127.0.0.1:7", "caller")
	n, conn, started := holdNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	call := func(id string) {
		t.Helper()
		n.receive(nodeContext{messageContext{msg: messages.ToolCall(id, id, "hold", json.RawMessage(`{"id":"`+id+`"}`))}, caller})
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatalf("call %s did not start", id)
		}
	}
	cancelled := func(id string) {
		t.Helper()
		f, err := conn.Recv(ctx)
		for err == nil && f.GetType() != messages.FrameType_TOOL_RESULT {
			f, err = conn.Recv(ctx)
		}
		if err != nil {
			t.Fatalf("waiting for call %s's result: %v", id, err)
		}
		if f.GetToolCallId() != id || tools.KindOf(f) != tools.FailureCancelled {
			t.Errorf("result %s of %s, want %s cancelled", f.GetPayload(), f.GetToolCallId(), id)
		}
	}
	addressTerminated := &actor.Terminated{Who: caller, Why: actor.TerminatedReason_AddressTerminated}

	call("c1") // over connection 1, which ends
	n.receive(messageContext{msg: &peerGone{address: caller.Address}})
	cancelled("c1")
	// The caller calls again (over connection 2); then connection 1's
	// watcher tells of connection 1's end.
	call("c2")
	n.receive(messageContext{msg: addressTerminated})
	if _, ok := n.routes.Load(callKey{"c2", "c2"}); !ok || Routes(n) != 1 {
		t.Fatalf("routes left: %d; the late Terminated of connection 1 cancelled call c2 of connection 2", Routes(n))
	}
	if n.callers[caller.String()] == nil {
		t.Error("the caller of connection 2 is no longer taken for watched")
	}
	// Connection 2 ends: its peerGone cancels c2; its own watcher's
	// Terminated adds nothing.
	n.receive(messageContext{msg: &peerGone{address: caller.Address}})
	n.receive(messageContext{msg: addressTerminated})
	cancelled("c2")
	if Routes(n) != 0 || len(n.callers) != 0 {
		t.Errorf("after connection 2 ended: %d routes, callers %v; want none", Routes(n), n.callers)
	}
	// The caller's actor stopping (its Terminated for any other reason)
	// is a going of its own.
	call("c3")
	n.receive(messageContext{msg: &actor.Terminated{Who: caller, Why: actor.TerminatedReason_Stopped}})
	cancelled("c3")
	if Routes(n) != 0 || len(n.callers) != 0 {
		t.Errorf("after the caller stopped: %d routes, callers %v; want none", Routes(n), n.callers)
	}
	if err := conn.Close(ctx); err != nil {
		t.Error(err)
	}
}

// The redial backoff starts at ClientOptions.RedialBackoff and doubles
// with each failure to open a connection, up to MaxRedialBackoff; a
// negative one means none, and zeros the defaults.
func TestProxy_RedialBackoff(t *testing.T) {
	for _, c := range []struct {
		backoff, max time.Duration
		want         []time.Duration // after 1, 2, 3… failures
	}{
		{100 * time.Millisecond, 250 * time.Millisecond, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}},
		{0, 0, []time.Duration{DefaultRedialBackoff, 2 * DefaultRedialBackoff, 4 * DefaultRedialBackoff}},
		{time.Minute, 0, []time.Duration{time.Minute, time.Minute}},
		{-1, 0, []time.Duration{0, 0}},
	} {
		p := newProxy(ClientOptions{RedialBackoff: c.backoff, MaxRedialBackoff: c.max})
		for i, want := range c.want {
			if got := p.wait(i + 1); got != want {
				t.Errorf("backoff %v, max %v: after %d failures %v, want %v", c.backoff, c.max, i+1, got, want)
			}
		}
		if got := p.wait(1000); c.backoff >= 0 && got != p.max {
			t.Errorf("backoff %v, max %v: after 1000 failures %v, want %v", c.backoff, c.max, got, p.max)
		}
	}
}

// startCall hands p a call of hold (stream and id id) on the node at
// addr, and returns its waiter.
func startCall(p *proxy, addr, id string) *waiter {
	w := &waiter{node: actor.NewPID(addr, ServiceName), done: make(chan struct{})}
	receive(p, &start{frame: messages.ToolCall(id, id, "hold", nil), w: w})
	return w
}

// answered reports whether w has its answer, and the answer's error.
func answered(w *waiter) (bool, error) {
	select {
	case <-w.done:
		return true, w.err
	default:
		return false, nil
	}
}

// A connection that fails to open backs its node off even when the call
// that dialled it is no longer waiting (its ctx ended first): the next
// call is answered at once, without a dial, and the going is reported.
func TestProxy_FailedDialBacksOffWithoutItsCall(t *testing.T) {
	const addr = "127.0.0.1:7"
	now := time.Now()
	var gone []string
	p := newProxy(ClientOptions{OnNodeGone: func(a string) { gone = append(gone, a) }})
	p.now = func() time.Time { return now }
	startCall(p, addr, "c1")
	receive(p, &forget{node: actor.NewPID(addr, ServiceName), key: callKey{"c1", "c1"}, cancel: true})
	receive(p, &peerGone{address: addr})
	if done, err := answered(startCall(p, addr, "c2")); !done || !errors.Is(err, ErrNodeUnreachable) {
		t.Errorf("the call after the failed dial: answered %v (%v), want ErrNodeUnreachable at once, the node backed off", done, err)
	}
	if !slices.Equal(gone, []string{addr}) {
		t.Errorf("nodes reported gone %q, want %q", gone, addr)
	}
}

// The client forgets a node known gone once the node's backoff has passed
// and MaxRedialBackoff more, unless a call waits on it: the list of nodes
// gone does not grow with every address that never comes back.
func TestProxy_ForgetsNodesGoneLongAgo(t *testing.T) {
	now := time.Now()
	p := newProxy(ClientOptions{RedialBackoff: time.Second, MaxRedialBackoff: 4 * time.Second})
	p.now = func() time.Time { return now }
	const nodes = 100
	for i := range nodes {
		addr := fmt.Sprintf("127.0.0.1:%d", 1000+i)
		startCall(p, addr, addr)
		receive(p, &peerGone{address: addr}) // failed to open: backed off 1 s
	}
	// One node whose connection had opened and then ended, and one called
	// again once its backoff has passed, whose call waits for its dial.
	const ended, called = "127.0.0.1:2000", "127.0.0.1:1000"
	receive(p, &peerOpened{address: ended})
	receive(p, &peerGone{address: ended})
	now = now.Add(time.Second)
	w := startCall(p, called, "again")
	if len(p.down) != nodes+1 {
		t.Fatalf("%d nodes known gone, want %d", len(p.down), nodes+1)
	}
	now = now.Add(4*time.Second + time.Millisecond)
	startCall(p, "127.0.0.1:3000", "other") // the client's actor at work
	if _, kept := p.down[called]; !kept || len(p.down) != 1 {
		t.Errorf("%d nodes known gone (%v kept), want only the node whose call waits", len(p.down), kept)
	}
	// That call's dial fails: the node's second failure doubles its
	// backoff.
	receive(p, &peerGone{address: called})
	if done, err := answered(w); !done || !errors.Is(err, ErrNodeUnreachable) {
		t.Fatalf("the call on the node that failed again: answered %v (%v)", done, err)
	}
	if r := p.down[called]; r == nil || r.failures != 2 || !r.at.Equal(now.Add(2*time.Second)) {
		t.Errorf("the node that failed again: %+v, want 2 failures, backed off 2 s", r)
	}
}

// The end of a node's connection to a caller that is still there (only
// that connection was lost) answers the caller's calls: the node sends
// each an error result of kind KindConnectionLost (over a new
// connection), instead of leaving the caller to wait for its timeout;
// the client answers the call with ErrConnectionLost.
func TestNode_PeerGoneTellsTheCaller(t *testing.T) {
	n, conn, started := holdNode(t)
	got := make(chan *messages.Frame, 4)
	caller, err := n.rt.System().Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if f, ok := c.Message().(*messages.Frame); ok {
			got <- f
		}
	}), "caller")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n.routes.Store(callKey{"s", "c1"}, route{to: caller, tool: "hold"})
	if err := conn.Send(messages.ToolCall("s", "c1", "hold", json.RawMessage(`{"id":"c1"}`))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("call c1 did not start")
	}

	n.receive(messageContext{msg: &peerGone{address: caller.Address}})
	var f *messages.Frame
	select {
	case f = <-got:
	case <-ctx.Done():
		t.Fatal("the caller was not told of its call")
	}
	if f.GetType() != messages.FrameType_TOOL_RESULT || f.GetStreamId() != "s" || f.GetToolCallId() != "c1" ||
		tools.KindOf(f) != KindConnectionLost {
		t.Errorf("the caller got %v %s/%s of kind %q, want c1's result of kind %q", f.GetType(), f.GetStreamId(), f.GetToolCallId(), tools.KindOf(f), KindConnectionLost)
	}
	if err := callError(f); !errors.Is(err, ErrConnectionLost) {
		t.Errorf("the client answers the call with %v, want ErrConnectionLost", err)
	}
	// The tool's own answer (cancelled) has no route: it is not sent.
	if r, err := conn.Recv(ctx); err != nil || tools.KindOf(r) != tools.FailureCancelled || Routes(n) != 0 {
		t.Errorf("the tool's answer %v (%v), %d routes left; want it cancelled, and none", r, err, Routes(n))
	}
	if err := conn.Close(ctx); err != nil {
		t.Error(err)
	}
}

// A connection that ends after its node's service stopped (the node's
// Terminated told of the going first) is no longer taken for open: the
// next call to that address (a node started there again) dials anew, and
// when the dial fails the call's error says why, and the node is backed
// off, as after any failure to open.
func TestProxy_ConnectionEndedAfterItsServiceStopped(t *testing.T) {
	const addr = "127.0.0.1:7"
	now := time.Now()
	p := newProxy(ClientOptions{RedialBackoff: time.Second})
	p.now = func() time.Time { return now }
	receive(p, &peerOpened{address: addr})
	receive(p, &actor.Terminated{Who: actor.NewPID(addr, ServiceName), Why: actor.TerminatedReason_Stopped})
	receive(p, &peerGone{address: addr})
	w := startCall(p, addr, "c")
	receive(p, &openFailed{address: addr, err: errors.New("error reading server preface: EOF")})
	receive(p, &peerGone{address: addr})
	done, err := answered(w)
	if !done || !errors.Is(err, ErrNodeUnreachable) || !strings.Contains(err.Error(), "the connection failed to open: error reading server preface") {
		t.Errorf("the call whose dial failed: answered %v (%v), want ErrNodeUnreachable saying why the connection failed to open", done, err)
	}
	if r := p.down[addr]; r == nil || r.failures != 1 || !r.at.Equal(now.Add(time.Second)) {
		t.Errorf("the node whose dial failed: %+v, want 1 failure, backed off 1 s", r)
	}
}

// The calls on a node whose open connection ended are answered with why
// it ended: the reason of the node's GOAWAY when it sent one, and else
// the connection's own error (the node closed it without a word, or the
// network failed it), so that an ErrNodeUnreachable says what happened.
func TestProxy_ConnectionEndSaysWhy(t *testing.T) {
	const addr = "127.0.0.1:7"
	for _, c := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.Unavailable, "error reading from server: EOF"), "(the connection ended: error reading from server: EOF)"},
		{status.Error(codes.Unavailable, "closing transport due to: connection error: desc = \"error reading from server: EOF\", received prior goaway: code: ENHANCE_YOUR_CALM, debug data: \"too many\""),
			`(the node closed the connection: code: ENHANCE_YOUR_CALM, debug data: "too many")`},
	} {
		p := newProxy(ClientOptions{})
		w := startCall(p, addr, "c")
		receive(p, &peerOpened{address: addr})
		receive(p, connEnded(addr, c.err))
		receive(p, &peerGone{address: addr})
		if done, err := answered(w); !done || !errors.Is(err, ErrNodeUnreachable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("connection ended with %v: call answered %v (%v), want ErrNodeUnreachable saying %s", c.err, done, err, c.want)
		}
	}
}
