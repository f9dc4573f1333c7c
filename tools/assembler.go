package tools

import (
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
)

// DecisionKind is what a tool stage does with a response frame.
type DecisionKind int

const (
	// Pass sends the frame on unchanged.
	Pass DecisionKind = iota
	// Run executes the call in Frame: an atomic TOOL_CALL with complete
	// arguments (streaming calls are reassembled into one).
	Run
	// Reject answers the call in Frame with an error result (Message)
	// without running it.
	Reject
)

// Decision is one outcome of [Assembler.Step].
type Decision struct {
	Kind    DecisionKind
	Frame   *messages.Frame
	Message string // for Reject
}

// Assembler is the decision logic of routers and the tool loop for frames
// on the response path: it turns atomic and streaming TOOL_CALLs into calls
// to run, buffers argument chunks in [PendingCalls], and passes every other
// frame on. It parses nothing: arguments are validated by the tool, so
// invalid or truncated JSON becomes an error result there. The zero value
// is ready; not safe for concurrent use.
type Assembler struct {
	Pending PendingCalls
}

// Step decides what to do with one response frame.
//
//   - atomic TOOL_CALL: Run it;
//   - streaming TOOL_CALL (meta.streaming): register it, nothing to pass;
//   - TEXT with meta.tool_arg_stream: append to its call, nothing to pass;
//   - META with meta.tool_complete: Run the call with the joined arguments;
//   - END or ERROR: Reject the stream's calls that never completed, then
//     Pass the frame;
//   - anything else: Pass.
//
// Chunks and completions for calls that are not pending are dropped.
func (a *Assembler) Step(f *messages.Frame) []Decision {
	switch {
	case f.IsStreamingToolCall():
		a.Pending.CallStarted(f.GetStreamId(), f.GetToolCallId(), f.GetName(), f.GetMeta().GetIndex())
		return nil
	case f.GetType() == messages.FrameType_TOOL_CALL:
		return []Decision{{Kind: Run, Frame: f}}
	case f.IsToolArgChunk():
		a.Pending.ChunkAppended(f.GetStreamId(), f.GetToolCallId(), f.GetText())
		return nil
	case f.IsToolComplete():
		pc, ok := a.Pending.CallCompleted(f.GetStreamId(), f.GetToolCallId())
		if !ok {
			return nil
		}
		return []Decision{{Kind: Run, Frame: pc.frame()}}
	case f.GetType() == messages.FrameType_END || f.GetType() == messages.FrameType_ERROR:
		var out []Decision
		for _, pc := range a.Pending.StreamEnded(f.GetStreamId()) {
			out = append(out, Decision{Kind: Reject, Frame: pc.frame(), Message: fmt.Sprintf(
				"invalid arguments for tool %q: the stream ended before the arguments were complete", pc.Name)})
		}
		return append(out, Decision{Kind: Pass, Frame: f})
	}
	return []Decision{{Kind: Pass, Frame: f}}
}

// frame is the pending call as an atomic TOOL_CALL.
func (pc PendingCall) frame() *messages.Frame {
	f := messages.ToolCall(pc.StreamID, pc.ToolCallID, pc.Name, pc.Args)
	if pc.Index != 0 {
		f.Meta = &messages.Metadata{Index: pc.Index}
	}
	return f
}
