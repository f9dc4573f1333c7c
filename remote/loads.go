package remote

import (
	"context"
	"fmt"
	"sync"

	paremote "github.com/asynkron/protoactor-go/remote"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/tools"
)

// DefaultMaxCallsPerCaller bounds, unless NodeOptions.MaxCallsPerCaller
// says otherwise, the calls a caller's connection may have in flight on a
// node, and the answers to it that may wait to go out.
const DefaultMaxCallsPerCaller = 1024

// loads is what each caller's connection (an incoming stream, by its name
// as in connHeader) costs a node: its calls in flight (routed to a tool,
// not yet answered), and the answers to its requests that wait in
// protoactor's queue for the caller's address, not yet handed to gRPC.
// A caller that reads its answers slowly (or not at all) makes them wait
// there: once max of them wait, the node stops reading the caller's
// connection (its guard's RecvMsg waits), so that its further requests
// wait on its side, and the queue stops growing with them. A call over
// max in flight is answered at once (see tooBusy): a call that runs long
// must not stop the CANCELs that follow it on the connection, as a
// connection not read would.
type loads struct {
	max int

	mu      sync.Mutex
	calls   map[string]int            // conn → calls in flight
	waiting map[string]map[string]int // conn → caller address → answers waiting to go out
	queued  map[string]int            // conn → the sum of its waiting
	changed chan struct{}             // closed (and replaced) when an answer goes out, or a connection is forgotten
}

func newLoads(max int) *loads {
	if max == 0 {
		max = DefaultMaxCallsPerCaller
	}
	return &loads{max: max, calls: map[string]int{}, waiting: map[string]map[string]int{}, queued: map[string]int{}, changed: make(chan struct{})}
}

// call counts a call of conn about to be routed, unless conn has max
// in flight (or max is negative: no bound).
func (l *loads) call(conn string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.calls[conn] >= l.max {
		return false
	}
	l.calls[conn]++
	return true
}

// answered counts a call of conn no longer in flight (answered, or
// cancelled).
func (l *loads) answered(conn string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls[conn]--; l.calls[conn] <= 0 {
		delete(l.calls, conn)
	}
}

// queue counts an answer to a request of conn that waits to go out to
// addr.
func (l *loads) queue(conn, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.waiting[conn]
	if w == nil {
		w = map[string]int{}
		l.waiting[conn] = w
	}
	w[addr]++
	l.queued[conn]++
}

// sent counts the answers of b (a batch handed to gRPC, to addr) as gone
// out.
func (l *loads) sent(addr string, b *paremote.MessageBatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := false
	for _, e := range b.GetEnvelopes() {
		conn := e.GetMessageHeader().GetHeaderData()[connHeader]
		if w := l.waiting[conn]; conn != "" && w[addr] > 0 {
			w[addr]--
			l.queued[conn]--
			out = true
		}
	}
	if out {
		l.wake()
	}
}

// lost forgets the answers waiting to go out to addr: protoactor dropped
// them with its connection to addr.
func (l *loads) lost(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for conn, w := range l.waiting {
		l.queued[conn] -= w[addr]
		delete(w, addr)
	}
	l.wake()
}

// forget forgets conn, which ended.
func (l *loads) forget(conn string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.calls, conn)
	delete(l.waiting, conn)
	delete(l.queued, conn)
	l.wake()
}

// wake tells the waiters that something went out; l.mu is held.
func (l *loads) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait returns once fewer than max answers to conn's requests wait to go
// out, or with ctx's error.
func (l *loads) wait(ctx context.Context, conn string) error {
	for {
		l.mu.Lock()
		if l.max < 0 || l.queued[conn] < l.max {
			l.mu.Unlock()
			return nil
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tooBusy is the answer to call, not run because its caller's connection
// had max calls in flight on the node.
func tooBusy(call *messages.Frame, max int) *messages.Frame {
	f := messages.ToolError(call.GetStreamId(), call.GetToolCallId(), call.GetName(), fmt.Sprintf(
		"Tool %s was not run: the caller has %d calls in flight on this node, the limit of %d calls per caller; call again once some are answered",
		call.GetName(), max, max))
	f.Meta.FailureKind = string(tools.FailureUnavailable)
	return f
}
