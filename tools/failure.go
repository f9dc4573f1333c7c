package tools

import (
	"cmp"
	"encoding/json"

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
	FailureFailed           FailureKind = actors.FailedKind  // the tool actor's Logic failed on the call and was resumed
	FailureCancelled        FailureKind = "cancelled"
	FailureUnknownTool      FailureKind = "unknown_tool"
	FailureUnavailable      FailureKind = "unavailable" // see below
	FailureLimit            FailureKind = "iteration_limit"
	FailureTruncated        FailureKind = "truncated" // the length limit cut the call's arguments off
	FailureNotFound         FailureKind = "not_found" // see below
	FailureTooLarge         FailureKind = "too_large" // see below
)

// FailureNotFound is the kind of a call whose arguments were valid but
// name something that is not there (read_file of a missing file, an undo
// of a write that was never recorded): the tool works, the world does
// not hold what the call asked for. Like invalid arguments it does not
// count against the tool's circuit breaker. A tool answers with it by
// returning a [ResultError] of this Kind.

// FailureUnavailable is the kind of a call that was not run because what
// runs it was not there: the router refused it (the tool's circuit breaker
// open, the tool actor stopped for good), or the tool itself answered so
// for a want of its own that says nothing of its health (a busy machine:
// package workspace's run_command when the sandbox of its command could
// not be set up in time or for want of resources). It does not count
// against the tool's circuit breaker. The same call may succeed later,
// but not on a router whose tool actor stopped for good. A tool answers
// with it by returning a [ResultError] of this Kind.

// FailureTooLarge is the kind of a call whose call or result was over a
// size limit of the transport that carries it (package remote's frame
// limit, an MCP server's result limit): the call was not sent (or not
// run), or its result was replaced by this error. It says nothing of the tool's
// health, so it does not count against the tool's circuit breaker.

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
// unhealthy (and counts for its circuit breaker). The other kinds say the
// call was wrong (invalid arguments, not found), was not run (denied,
// unknown tool, the breaker open, the limit, truncated, too large) or
// was stopped by its caller (cancelled).
func (k FailureKind) countsAgainstTool() bool {
	switch k {
	case FailureHandler, FailureTimeout, FailurePanic, FailureStopped, FailureFailed:
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

// errorResult answers call with a failure of the given kind: the shape of
// messages.ToolError, {"success":false,"error":message}, encoded as
// results are (encodeResult), so that "<", ">" and "&" in the message
// reach the model as themselves, as in a successful result.
func errorResult(call *messages.Frame, kind FailureKind, message string) *messages.Frame {
	payload, _ := encodeResult(messages.ErrorResult{Error: message}) // a struct of strings always encodes
	f := messages.RawToolResult(call.GetStreamId(), call.GetToolCallId(), call.GetName(), payload)
	f.Meta = &messages.Metadata{IsError: true, FailureKind: string(kind)}
	return f
}

// ResultError is an error a handler returns to answer its call with an
// error result whose payload is the tool's own result object rather than
// {"success":false,"error":...}: a tool that reports a refusal in a shape
// of its own (say {"success":false,"error":...,"path":...}) keeps that
// shape, and the call is still marked failed, with Kind (empty means
// FailureHandler) in the frame's metadata. A Payload that is not valid
// JSON is ignored and the result is made from Error() as for any error.
type ResultError struct {
	Payload json.RawMessage // what the model reads
	Kind    FailureKind
	Err     error // what failed, for Go callers and logs; may be nil
}

func (e *ResultError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return string(e.Payload)
}

func (e *ResultError) Unwrap() error { return e.Err }

// frame answers call with e's payload, or reports false when it has none
// that is valid.
func (e *ResultError) frame(call *messages.Frame) (*messages.Frame, bool) {
	if len(e.Payload) == 0 || !json.Valid(e.Payload) {
		return nil, false
	}
	f := messages.RawToolResult(call.GetStreamId(), call.GetToolCallId(), call.GetName(), e.Payload)
	f.Meta = &messages.Metadata{IsError: true, FailureKind: string(cmp.Or(e.Kind, FailureHandler))}
	return f, true
}
