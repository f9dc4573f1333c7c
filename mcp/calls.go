package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// caller runs tool calls that arrive from outside any actor (an MCP
// request handler) as TOOL_CALL frames through a tool router started on a
// runtime, so that every guarantee of a router holds for them: arguments
// are validated, timeouts and CANCEL stop the work, tools are supervised
// actors behind a circuit breaker, and each call gets exactly one
// TOOL_RESULT.
//
// The router wraps a reflector: a duplex that emits every TOOL_CALL
// written into it (the router intercepts and runs it, as it would a
// model's call) and every TOOL_RESULT the router writes back into it (the
// router passes it out, to the caller's Conn). Each call has a stream of
// its own, so a CANCEL for that stream reaches that call only.
//
// A caller is safe for concurrent use.
type caller struct {
	conn *actors.Conn
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	next    uint64
	waiting map[string]chan *messages.Frame
	closed  error
}

// errCallerClosed is the error of calls made after [caller.close].
var errCallerClosed = errors.New("mcp: server closed")

func newCaller(rt *actors.Runtime, name string, ts []*tools.Tool, breaker tools.BreakerOptions, sup *supervisor.Strategy) (*caller, error) {
	reflector := actors.Duplex(name+"-calls", func(f *messages.Frame, emit func(*messages.Frame)) {
		switch f.GetType() {
		case messages.FrameType_TOOL_CALL, messages.FrameType_TOOL_RESULT:
			emit(f)
		}
	})
	spec, err := tools.NewAsyncRouter(reflector, &tools.RouterOptions{Name: name, Tools: ts, Breaker: breaker, Supervision: sup})
	if err != nil {
		return nil, err
	}
	spec.Name = "" // unique per start: several servers may share a runtime
	conn, err := rt.Start(spec)
	if err != nil {
		return nil, fmt.Errorf("start tool router: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &caller{conn: conn, stop: stop, done: make(chan struct{}), waiting: map[string]chan *messages.Frame{}}
	go c.demux(ctx)
	return c, nil
}

// demux hands each TOOL_RESULT to the call waiting for its stream. When
// the router stops, every call still waiting is answered with an error
// result: a call never waits for an answer that cannot come.
func (c *caller) demux(ctx context.Context) {
	defer close(c.done)
	for {
		f, err := c.conn.Recv(ctx)
		if err != nil {
			c.fail(fmt.Errorf("tool router stopped: %w", err))
			return
		}
		if f.GetType() != messages.FrameType_TOOL_RESULT {
			continue
		}
		c.mu.Lock()
		ch, ok := c.waiting[f.GetStreamId()]
		delete(c.waiting, f.GetStreamId())
		c.mu.Unlock()
		if ok {
			ch <- f // buffered: one result per call
		}
	}
}

func (c *caller) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		c.closed = err
	}
	for stream, ch := range c.waiting {
		ch <- messages.ToolError(stream, stream, "", err.Error())
		delete(c.waiting, stream)
	}
}

// call is one call in flight.
type call struct {
	c      *caller
	stream string
	result chan *messages.Frame
}

// start sends a TOOL_CALL for name with args and returns the call to wait
// on.
func (c *caller) start(name string, args json.RawMessage) (*call, error) {
	c.mu.Lock()
	if c.closed != nil {
		err := c.closed
		c.mu.Unlock()
		return nil, err
	}
	c.next++
	stream := "mcp-" + strconv.FormatUint(c.next, 10)
	ch := make(chan *messages.Frame, 1)
	c.waiting[stream] = ch
	c.mu.Unlock()
	if err := c.conn.Send(messages.ToolCall(stream, stream, name, args)); err != nil {
		c.mu.Lock()
		delete(c.waiting, stream)
		c.mu.Unlock()
		return nil, fmt.Errorf("send tool call: %w", err)
	}
	return &call{c: c, stream: stream, result: ch}, nil
}

// cancel sends CANCEL for the call; its (cancelled) result still comes.
func (cl *call) cancel() {
	_ = cl.c.conn.Send(messages.Cancel(cl.stream, cl.stream))
}

// close stops the router (and its tool actors) and waits for the demux to
// end; calls still waiting get error results.
func (c *caller) close(ctx context.Context) error {
	err := c.conn.Close(ctx)
	c.stop()
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.fail(errCallerClosed)
	return err
}
