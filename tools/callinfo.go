package tools

import (
	"context"

	"github.com/polyweave/polyweave-go/messages"
)

// CallInfo says which call a handler runs.
type CallInfo struct {
	StreamID   string
	ToolCallID string
	Tool       string
}

type callInfoKey struct{}

func withCall(ctx context.Context, call *messages.Frame) context.Context {
	return context.WithValue(ctx, callInfoKey{}, call) // the frame: no copy made per call
}

// CallFrom returns the call a handler's ctx belongs to (its stream, id
// and tool name), for tools that keep per-call or per-conversation
// records (see workspace.Journal). ok is false for a context that is
// not a handler's.
func CallFrom(ctx context.Context) (info CallInfo, ok bool) {
	call, ok := ctx.Value(callInfoKey{}).(*messages.Frame)
	if !ok {
		return CallInfo{}, false
	}
	return CallInfo{StreamID: call.GetStreamId(), ToolCallID: call.GetToolCallId(), Tool: call.GetName()}, true
}
