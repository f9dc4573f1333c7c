package models

import (
	"encoding/json"
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
)

// ToolCall is a complete tool call read back from a response.
type ToolCall struct {
	// Index is the call's position in the turn.
	Index int
	ID    string
	Name  string
	// Arguments is the JSON arguments: an atomic call's payload, or the
	// concatenation of a streaming call's chunks.
	Arguments json.RawMessage
	// Streamed tells whether the call arrived as a streaming call.
	Streamed bool
}

// ProtocolError is returned by [Response.Add] for a frame that breaks the
// model-adapter contract.
type ProtocolError struct {
	StreamID string
	Frame    messages.FrameType
	Reason   string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("models: stream %q: %s frame: %s", e.StreamID, e.Frame, e.Reason)
}

// Response reads the frames of one model response back into what the model
// said, checking them against the contract of this package as it goes.
// The conformance suite uses it, and so can any consumer that wants a
// whole turn rather than frames.
//
// The zero Response is ready and takes the stream id of its first frame.
// It is not safe for concurrent use.
type Response struct {
	StreamID string
	// Text is the concatenation of the TEXT frames.
	Text string
	// ToolCalls are the calls the response made, in order. A streaming
	// call appears once complete.
	ToolCalls []ToolCall
	// Truncated are the calls the length limit cut off (META
	// truncated_call frames), in order; Arguments holds the frame's
	// payload ({"name","received"}).
	Truncated []ToolCall
	// ThinkingBlocks is the payload of the META thinking_blocks frame, if
	// any.
	ThinkingBlocks json.RawMessage
	// Usage is the payload of the META usage frame, if any.
	Usage json.RawMessage
	// Finish is the finish reason of the META finish frame, if any.
	Finish string
	// Error is the text of the ERROR frame; Failed tells there was one.
	Error  string
	Failed bool
	// ErrorKind is the ERROR frame's failure kind, if it has one (see
	// [FailurePermanent]).
	ErrorKind string
	// Ended is set by the END frame.
	Ended bool

	// open are the streaming calls whose arguments are still arriving.
	open  map[string]*openCall
	calls int // calls started, streaming ones included
}

type openCall struct {
	call ToolCall
	args []byte
}

// Add folds f into the response. It returns a *[ProtocolError] when f
// breaks the contract: a frame of another stream or after END, anything
// but END after ERROR, a tool call with a duplicate id, a wrong meta index
// or invalid JSON arguments, a chunk or completion of an unknown call,
// a malformed META finish, or an END that leaves a streaming call open
// without an ERROR. The response is unchanged by a rejected frame.
func (r *Response) Add(f *messages.Frame) error {
	if r.StreamID == "" {
		r.StreamID = f.GetStreamId()
	}
	bad := func(format string, args ...any) error {
		return &ProtocolError{StreamID: r.StreamID, Frame: f.GetType(), Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case f.GetStreamId() != r.StreamID:
		return bad("belongs to stream %q", f.GetStreamId())
	case r.Ended:
		return bad("after END")
	case r.Failed && f.GetType() != messages.FrameType_END:
		return bad("after ERROR")
	}
	switch f.GetType() {
	case messages.FrameType_TEXT:
		if !f.IsToolArgChunk() {
			r.Text += f.GetText()
			return nil
		}
		c, ok := r.open[f.GetToolCallId()]
		if !ok {
			return bad("argument chunk for unknown call %q", f.GetToolCallId())
		}
		c.args = append(c.args, f.GetText()...)
	case messages.FrameType_TOOL_CALL:
		id := f.GetToolCallId()
		if id == "" || f.GetName() == "" {
			return bad("tool call without id or name")
		}
		if r.hasCall(id) {
			return bad("duplicate tool call id %q", id)
		}
		if got := int(f.GetMeta().GetIndex()); got != r.calls {
			return bad("call %q has meta index %d, want %d", id, got, r.calls)
		}
		call := ToolCall{Index: r.calls, ID: id, Name: f.GetName()}
		if f.IsStreamingToolCall() {
			if r.open == nil {
				r.open = make(map[string]*openCall)
			}
			call.Streamed = true
			r.open[id] = &openCall{call: call}
		} else {
			if !json.Valid(f.GetPayload()) {
				return bad("call %q has invalid JSON arguments %q", id, f.GetPayload())
			}
			call.Arguments = f.GetPayload()
			r.ToolCalls = append(r.ToolCalls, call)
		}
		r.calls++
	case messages.FrameType_META:
		switch {
		case f.IsToolComplete():
			c, ok := r.open[f.GetToolCallId()]
			if !ok {
				return bad("completion of unknown call %q", f.GetToolCallId())
			}
			if !json.Valid(c.args) {
				return bad("call %q completed with invalid JSON arguments %q", c.call.ID, c.args)
			}
			delete(r.open, c.call.ID)
			c.call.Arguments = c.args
			r.ToolCalls = append(r.ToolCalls, c.call)
		case f.GetName() == MetaFinish:
			var reason string
			if err := json.Unmarshal(f.GetPayload(), &reason); err != nil || reason == "" {
				return bad("finish reason %q is not a JSON string", f.GetPayload())
			}
			r.Finish = reason
		case f.GetName() == MetaUsage:
			r.Usage = f.GetPayload()
		case f.GetName() == MetaTruncatedCall:
			tc, err := ReadTruncatedCall(f)
			if err != nil {
				return bad("%v", err)
			}
			if r.hasCall(f.GetToolCallId()) {
				return bad("duplicate tool call id %q", f.GetToolCallId())
			}
			r.Truncated = append(r.Truncated, ToolCall{Index: int(f.GetMeta().GetIndex()), ID: f.GetToolCallId(), Name: tc.Name, Arguments: f.GetPayload()})
		case f.GetName() == MetaThinkingBlocks:
			r.ThinkingBlocks = f.GetPayload()
		}
	case messages.FrameType_ERROR:
		r.Failed, r.Error, r.ErrorKind = true, f.GetText(), f.GetMeta().GetFailureKind()
	case messages.FrameType_END:
		if len(r.open) > 0 && !r.Failed {
			return bad("%d streaming call(s) left incomplete without an ERROR", len(r.open))
		}
		r.Ended = true
	default:
		return bad("unexpected in a response")
	}
	return nil
}

func (r *Response) hasCall(id string) bool {
	if _, ok := r.open[id]; ok {
		return true
	}
	for _, c := range r.ToolCalls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// ReadResponse folds frames into a new Response and returns it with the
// first protocol error met, if any.
func ReadResponse(frames []*messages.Frame) (*Response, error) {
	r := &Response{}
	for _, f := range frames {
		if err := r.Add(f); err != nil {
			return r, err
		}
	}
	return r, nil
}
