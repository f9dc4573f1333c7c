package messages

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// Param builds a PARAM frame whose value is v encoded as JSON (without HTML
// escaping, as every payload this package encodes). It returns an
// error when v cannot be encoded.
func Param(streamID, name string, v any) (*Frame, error) {
	payload, err := Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode param %q: %w", name, err)
	}
	return &Frame{Type: FrameType_PARAM, StreamId: streamID, Name: name, Payload: payload}, nil
}

// RawParam builds a PARAM frame from an already encoded JSON value.
func RawParam(streamID, name string, value json.RawMessage) *Frame {
	return &Frame{Type: FrameType_PARAM, StreamId: streamID, Name: name, Payload: value}
}

// Text builds a TEXT frame carrying content.
func Text(streamID, content string) *Frame {
	return &Frame{Type: FrameType_TEXT, StreamId: streamID, Text: content}
}

// End builds the END frame that closes a stream.
func End(streamID string) *Frame {
	return &Frame{Type: FrameType_END, StreamId: streamID}
}

// Error builds an ERROR frame: the stage that emits it could not finish the
// stream. An END frame for the same stream follows it.
func Error(streamID, message string) *Frame {
	return &Frame{Type: FrameType_ERROR, StreamId: streamID, Text: message}
}

// Describe builds a DESCRIBE frame asking a tool to describe itself.
func Describe(streamID string) *Frame {
	return &Frame{Type: FrameType_DESCRIBE, StreamId: streamID}
}

// Cancel builds a CANCEL frame. With a tool-call id it cancels that call;
// without one, every call of the stream.
func Cancel(streamID, toolCallID string) *Frame {
	return &Frame{Type: FrameType_CANCEL, StreamId: streamID, ToolCallId: toolCallID}
}

// Abort builds an ABORT frame for a stream.
func Abort(streamID string) *Frame {
	return &Frame{Type: FrameType_ABORT, StreamId: streamID}
}

// Tick builds a TICK frame.
func Tick(streamID string) *Frame {
	return &Frame{Type: FrameType_TICK, StreamId: streamID}
}

// Meta builds a META frame of the given kind with a raw JSON value.
func Meta(streamID, kind string, value json.RawMessage) *Frame {
	return &Frame{Type: FrameType_META, StreamId: streamID, Name: kind, Payload: value}
}

// ToolCall builds an atomic TOOL_CALL frame: the arguments are complete.
func ToolCall(streamID, toolCallID, name string, args json.RawMessage) *Frame {
	return &Frame{Type: FrameType_TOOL_CALL, StreamId: streamID, ToolCallId: toolCallID, Name: name, Payload: args}
}

// StreamingToolCall builds a TOOL_CALL whose arguments follow as
// [ToolArgChunk] frames and end with [ToolComplete].
func StreamingToolCall(streamID, toolCallID, name string) *Frame {
	return &Frame{Type: FrameType_TOOL_CALL, StreamId: streamID, ToolCallId: toolCallID, Name: name,
		Meta: &Metadata{Streaming: true}}
}

// ToolArgChunk builds a TEXT frame carrying a piece of a streaming call's
// arguments. Pieces may split the JSON anywhere.
func ToolArgChunk(streamID, toolCallID, chunk string) *Frame {
	return &Frame{Type: FrameType_TEXT, StreamId: streamID, ToolCallId: toolCallID, Text: chunk,
		Meta: &Metadata{ToolArgStream: true}}
}

// ToolComplete builds the META frame that says a streaming call's arguments
// are complete.
func ToolComplete(streamID, toolCallID string) *Frame {
	return &Frame{Type: FrameType_META, StreamId: streamID, ToolCallId: toolCallID,
		Meta: &Metadata{ToolComplete: true}}
}

// ToolResult builds a successful TOOL_RESULT whose content is result encoded
// as JSON; a nil result is sent as {} as in the seed protocol. It returns an
// error when result cannot be encoded.
func ToolResult(streamID, toolCallID, name string, result any) (*Frame, error) {
	var payload []byte
	switch r := result.(type) {
	case nil:
		payload = []byte("{}")
	case json.RawMessage:
		payload = r
	default:
		var err error
		if payload, err = Marshal(r); err != nil {
			return nil, fmt.Errorf("encode result of tool %q: %w", name, err)
		}
	}
	return RawToolResult(streamID, toolCallID, name, payload), nil
}

// Marshal is json.Marshal without HTML escaping, as every payload this
// package builds is encoded: a result's "<", ">" and "&" reach the model
// as themselves, as the tools package's own results do.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// RawToolResult builds a successful TOOL_RESULT from an encoded JSON result.
func RawToolResult(streamID, toolCallID, name string, result json.RawMessage) *Frame {
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	return &Frame{Type: FrameType_TOOL_RESULT, StreamId: streamID, ToolCallId: toolCallID, Name: name, Payload: result}
}

// ErrorResult is the JSON shape of a failed tool call, read by the model.
type ErrorResult struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

// ToolError builds a TOOL_RESULT reporting a failure to the model as
// {"success":false,"error":message}, with the is_error flag set.
func ToolError(streamID, toolCallID, name, message string) *Frame {
	payload, _ := Marshal(ErrorResult{Success: false, Error: message}) // a struct of strings always encodes
	return &Frame{Type: FrameType_TOOL_RESULT, StreamId: streamID, ToolCallId: toolCallID, Name: name,
		Payload: payload, Meta: &Metadata{IsError: true}}
}

// Decode unmarshals the frame's JSON payload into v.
func (f *Frame) Decode(v any) error {
	if len(f.GetPayload()) == 0 {
		return fmt.Errorf("decode %s frame %q: empty payload", f.GetType(), f.GetName())
	}
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("decode %s frame %q: %w", f.GetType(), f.GetName(), err)
	}
	return nil
}

// IsParam reports whether f is a PARAM frame named name.
func (f *Frame) IsParam(name string) bool {
	return f.GetType() == FrameType_PARAM && f.GetName() == name
}

// IsToolArgChunk reports whether f is a TEXT chunk of streaming tool arguments.
func (f *Frame) IsToolArgChunk() bool {
	return f.GetType() == FrameType_TEXT && f.GetMeta().GetToolArgStream()
}

// IsToolComplete reports whether f is the META frame completing a streaming call.
func (f *Frame) IsToolComplete() bool {
	return f.GetType() == FrameType_META && f.GetMeta().GetToolComplete()
}

// IsStreamingToolCall reports whether f is a TOOL_CALL whose arguments follow as chunks.
func (f *Frame) IsStreamingToolCall() bool {
	return f.GetType() == FrameType_TOOL_CALL && f.GetMeta().GetStreaming()
}

// IsErrorResult reports whether f is a TOOL_RESULT that reports a failure.
func (f *Frame) IsErrorResult() bool {
	return f.GetType() == FrameType_TOOL_RESULT && f.GetMeta().GetIsError()
}

// RestoreState returns the snapshot carried by a META restore frame, and
// whether f is one.
func (f *Frame) RestoreState() ([]byte, bool) {
	if f.GetType() != FrameType_META {
		return nil, false
	}
	s := f.GetMeta().GetDurability().GetRestoreState()
	return s, s != nil
}

// CloneFrame returns a deep copy of f that the caller may change.
func CloneFrame(f *Frame) *Frame {
	return proto.Clone(f).(*Frame)
}
