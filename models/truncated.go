package models

import (
	"encoding/json"
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
)

// MetaTruncatedCall is the META frame an adapter emits, in the place of a
// TOOL_CALL, for a call whose arguments the length limit cut off (finish
// "length" in the middle of the call). Its tool-call id is the call's,
// Meta.index its position in the turn (after the complete calls), and its
// payload {"name":"<tool>","received":N}: the tool's name and the bytes
// of arguments that arrived. The
// response then ends normally (META finish "length", END), not with an
// ERROR: the turn happened, and the model must be told. A consumer closes
// the call as failed with [TruncatedCallError]'s text and runs nothing
// of it; a tool loop sends the assistant turn (the call with {} as its
// arguments) and that result back, and the model decides what to do.
const MetaTruncatedCall = "truncated_call"

// MetaThinkingBlocks is the META frame carrying the reasoning blocks of a
// response that a follow-up must send back unchanged (Anthropic's signed
// thinking blocks), as a JSON array; consumers put it in the assistant
// message's ThinkingBlocks.
const MetaThinkingBlocks = "thinking_blocks"

// TruncatedCallFrame builds the META frame of a call cut off by the
// length limit after received bytes of arguments.
func TruncatedCallFrame(streamID, callID, name string, index, received int) *messages.Frame {
	payload, _ := json.Marshal(TruncatedCall{Name: name, Received: received}) // strings and ints always encode
	f := messages.Meta(streamID, MetaTruncatedCall, payload)
	f.ToolCallId = callID
	f.Meta = &messages.Metadata{Index: uint32(index)}
	return f
}

// TruncatedCall is the payload of a META [MetaTruncatedCall] frame.
type TruncatedCall struct {
	Name     string `json:"name"`
	Received int    `json:"received"`
}

// ReadTruncatedCall reads the payload of a META [MetaTruncatedCall] frame.
func ReadTruncatedCall(f *messages.Frame) (TruncatedCall, error) {
	var tc TruncatedCall
	if err := json.Unmarshal(f.GetPayload(), &tc); err != nil || tc.Name == "" || f.GetToolCallId() == "" {
		return TruncatedCall{}, fmt.Errorf("truncated call %q: payload %s has no tool name", f.GetToolCallId(), f.GetPayload())
	}
	return tc, nil
}

// TruncatedCallError is the error a call cut off by the length limit is
// answered with: what happened, and what to do instead.
func TruncatedCallError(name string, received int) string {
	return fmt.Sprintf("The call to %s was not run: its arguments were cut off by the length limit of the answer after %d bytes. "+
		"Send the work in smaller pieces (for example several %s calls that each carry a part, or a shorter text) so that each call fits.",
		name, received, name)
}
