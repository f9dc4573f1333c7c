package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/tools"
)

// caller runs tool calls that arrive from outside any actor (an MCP
// request handler) as TOOL_CALL frames through a tool router started on a
// runtime, so that every guarantee of a router holds for them: arguments
// are validated, timeouts and CANCEL stop work, tools are supervised
// actors behind a circuit breaker, and each call gets exactly one
// TOOL_RESULT.
//
// The calls run on a call runner (tools.NewCallRunner): a router that
// takes each TOOL_CALL written into it and emits its TOOL_RESULT, with no
// duplex to pass through. Each call has a stream of its own, opened on the
// runner's Mux, so that its result goes straight to the request waiting
// for it (no goroutine in between) and a CANCEL for that stream reaches
// that call only.
//
// A caller is safe for concurrent use.
type caller struct {
	mux  *actors.Mux
	next atomic.Uint64
}

// errCallerClosed is the error of calls made after [caller.close], and of
// calls still waiting when the router stops.
var errCallerClosed = errors.New("mcp: server closed")

func newCaller(rt *actors.Runtime, name string, ts []*tools.Tool, breaker tools.BreakerOptions, sup *supervisor.Strategy) (*caller, error) {
	spec, err := tools.NewCallRunner(&tools.RouterOptions{Name: name, Tools: ts, Breaker: breaker, Supervision: sup})
	if err != nil {
		return nil, err
	}
	spec.Name = "" // unique per start: several servers may share a runtime
	mux, err := rt.StartMux(spec)
	if err != nil {
		return nil, fmt.Errorf("start tool router: %w", err)
	}
	return &caller{mux: mux}, nil
}

// call is one call in flight: the Mux stream its result comes on.
type call actors.MuxStream

// start sends a TOOL_CALL for name with args and returns the call to wait
// on.
func (c *caller) start(name string, args json.RawMessage) (*call, error) {
	stream := "mcp-" + strconv.FormatUint(c.next.Add(1), 10)
	s, err := c.mux.Open(stream)
	if err != nil {
		if errors.Is(err, actors.ErrDuplexStopped) {
			return nil, errCallerClosed
		}
		return nil, fmt.Errorf("mcp: open call stream: %w", err)
	}
	if err := s.Send(messages.ToolCall(stream, stream, name, args)); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: send tool call: %w", errCallerClosed, err)
	}
	return (*call)(s), nil
}

// wait returns the call's one TOOL_RESULT. When ctx ends first it sends
// CANCEL for the call and still waits for its (cancelled) result, so that
// the call never outlives the request unanswered. When the stream ends
// (END) without a result — the runner lost the call, failing as it took
// it — or the router stops first, the result is an error result: a
// request never waits for an answer that cannot come.
func (cl *call) wait(ctx context.Context) *messages.Frame {
	s := (*actors.MuxStream)(cl)
	defer s.Close()
	id := s.ID()
	var reason string // the ERROR the stream carried, if any
	for {
		f, err := s.Recv(ctx)
		switch {
		case err == nil:
			switch f.GetType() {
			case messages.FrameType_TOOL_RESULT:
				return f
			case messages.FrameType_ERROR:
				reason = f.GetText()
			case messages.FrameType_END:
				if reason == "" {
					reason = "the stream ended"
				}
				return messages.ToolError(id, id, "", fmt.Sprintf("mcp: the tool call was not answered: %s", reason))
			}
		case ctx.Err() != nil && !errors.Is(err, actors.ErrDuplexStopped):
			_ = s.Send(messages.Cancel(id, id))
			ctx = context.Background()
		default:
			return messages.ToolError(id, id, "", fmt.Sprintf("%v: tool router stopped: %v", errCallerClosed, err))
		}
	}
}

// close stops the router (and its tool actors) and waits until it is gone
// or ctx ends; calls still waiting get error results.
func (c *caller) close(ctx context.Context) error {
	return c.mux.Close(ctx)
}
