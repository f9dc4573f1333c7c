package tools

import (
	"fmt"
	"runtime/debug"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// callInline runs a call of a Sync tool in the caller's own turn, the way
// a dispatcher (router, installer, loop) runs cheap tools: no actor hop,
// the same validation, results and failure kinds as the tool duplex. The
// timeout reaches the handler as its context's deadline (a sync handler
// that ignores it runs to the end, and its result is then replaced by the
// timeout result); a panic (in validation or in the handler) becomes a
// "panicked" result, logged on c with its stack, and leaves the dispatcher
// serving, since a sync handler holds no state of its own.
func (t *Tool) callInline(c actors.WrapperContext, call *messages.Frame) (result *messages.Frame) {
	var ctx *syncContext
	// Installed first: a panic while the arguments are validated is this
	// call's answer too, not the dispatcher's failure.
	defer func() {
		if r := recover(); r != nil {
			during := "validation"
			if ctx != nil {
				ctx.end()
				during = "handler"
			}
			result = t.panicked(call, r)
			logPanic(c.Logger(), call, during, r, debug.Stack())
		}
	}()
	args, err := t.validator.validate(call.GetPayload())
	if err != nil {
		return errorResult(call, FailureInvalidArguments, err.Error())
	}
	// The context is an allocation of its own, apart from the result
	// frame: a handler may keep its context past its return (a goroutine
	// it started, a value it stored), and must not keep the result, whose
	// payload may be large, with it.
	ctx = newSyncContext(call, t.def.Timeout)
	out := t.run(ctx, call, args)
	if ctx.end() {
		return errorResult(call, FailureTimeout, fmt.Sprintf("Tool %s timed out after %dms", t.def.Name, t.def.Timeout.Milliseconds()))
	}
	return t.resultFrame(call, out)
}
