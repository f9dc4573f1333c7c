package tools

import (
	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// FailureKind says why a call failed. Error TOOL_RESULT frames made by this
// package carry it in their metadata's failure_kind (the model reads only
// the payload), so that dispatchers and observers can tell a broken tool from a bad call
// without parsing messages.
type FailureKind string

// The failure kinds.
const (
	FailureInvalidArguments FailureKind = "invalid_arguments"
	FailureHandler          FailureKind = "handler_error"
	FailureTimeout          FailureKind = "timeout"
	FailurePanic            FailureKind = "panic"
	FailureStopped          FailureKind = actors.StoppedKind // the tool actor failed, restarted or stopped mid-call
	FailureCancelled        FailureKind = "cancelled"
	FailureUnknownTool      FailureKind = "unknown_tool"
	FailureUnavailable      FailureKind = "unavailable" // circuit breaker open, or the tool is gone
	FailureLimit            FailureKind = "iteration_limit"
	FailureTruncated        FailureKind = "truncated" // the length limit cut the call's arguments off
)

// FailureSessionConflict is the failure kind of the ERROR with which a
// loop with a Session refuses a request whose messages differ from those
// that started the stored session (see [SessionOptions]): sending it
// again cannot help; a new conversation needs a new session id. The
// loop's other refusals of a request that cannot succeed (messages that
// are not a JSON array) and a model's failure of kind
// models.FailurePermanent end with an ERROR of kind
// models.FailurePermanent.
const FailureSessionConflict FailureKind = "session_conflict"

// countsAgainstTool reports whether a failure of this kind says the tool is
// unhealthy (and counts for its circuit breaker).
func (k FailureKind) countsAgainstTool() bool {
	switch k {
	case FailureHandler, FailureTimeout, FailurePanic, FailureStopped:
		return true
	}
	return false
}

// KindOf returns the failure kind of an error TOOL_RESULT, and "" for any
// other frame. Error results made elsewhere without a kind report
// FailureHandler.
func KindOf(result *messages.Frame) FailureKind {
	if !result.IsErrorResult() {
		return ""
	}
	if k := FailureKind(result.GetMeta().GetFailureKind()); k != "" {
		return k
	}
	return FailureHandler
}

// errorResult answers call with a failure of the given kind.
func errorResult(call *messages.Frame, kind FailureKind, message string) *messages.Frame {
	f := messages.ToolError(call.GetStreamId(), call.GetToolCallId(), call.GetName(), message)
	f.Meta.FailureKind = string(kind)
	return f
}
