package tools

import (
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
	out     []Decision // reused by Decide
}

// Step decides what to do with one response frame and applies the change
// it makes: [Assembler.Decide], then [PendingCalls.Apply].
//
//   - atomic TOOL_CALL: Run it;
//   - streaming TOOL_CALL (meta.streaming): register it, nothing to pass;
//   - TEXT with meta.tool_arg_stream: append to its call, nothing to pass;
//   - META with meta.tool_complete: Run the call with the joined arguments;
//   - END or ERROR: Reject the stream's calls that never completed, then
//     Pass the frame (a router answers the calls a CANCEL or ABORT cut
//     short before, as cancelled, and takes them out: the END finds
//     none of them; it answers those this END or ERROR rejects as
//     cancelled too when a CANCEL of the stream or an ABORT went to its
//     model before it started them; a router, which knows its
//     consumer's calls, ends only the pending call of that id at an
//     END or ERROR that ends one of them alone: see [NewRouter]);
//   - anything else: Pass.
//
// Chunks and completions for calls that are not pending are dropped. The
// decisions are valid until the next call of Step or Decide.
func (a *Assembler) Step(f *messages.Frame) []Decision {
	ev, out := a.Decide(f)
	a.Pending.Apply(ev)
	return out
}

// frame is the pending call as an atomic TOOL_CALL.
func (pc PendingCall) frame() *messages.Frame {
	f := messages.ToolCall(pc.StreamID, pc.ToolCallID, pc.Name, pc.Args)
	if pc.Index != 0 {
		f.Meta = &messages.Metadata{Index: pc.Index}
	}
	return f
}
