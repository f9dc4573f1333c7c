package tools

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// What MoveSession checks before it takes a session at the target for
// the one it moves (a move that a crash cut after the copy): two
// conversations may begin with the same request, so that alone does not
// make them one.

// wentOn reports whether session to, stored where MoveSession moves a
// session, holds all that session from, stored where it moves it from,
// holds: it is from as MoveSession copied it, or from went on to it (a
// loop resumed it at its new place), or both; from may be an earlier
// step of it, as the crash of a move that had deleted from's events and
// not its snapshot leaves it.
// The conversation of from (its messages) begins that of to, and the
// response from was in the middle of is the one to is in the middle of,
// or the round that follows in to: it said no more than that round, and
// its calls and results are the round's first.
func wentOn(to, from *messages.LoopSession) bool {
	n := len(from.GetMessages())
	if !bytes.Equal(to.GetFirstRequest(), from.GetFirstRequest()) || !sameParams(to.GetParams(), from.GetParams()) ||
		n > len(to.GetMessages()) || from.GetIteration() > to.GetIteration() || from.GetSteps() > to.GetSteps() {
		return false
	}
	for i, m := range from.GetMessages() {
		if !bytes.Equal(m, to.GetMessages()[i]) {
			return false
		}
	}
	done := messages.LoopPhase_LOOP_PHASE_DONE
	// A response with no call is sent again when its session resumes, and
	// what it had said is dropped: then to's text need not begin with it.
	said := func(text string) bool { return len(from.GetCalls()) == 0 || strings.HasPrefix(text, from.GetText()) }
	switch {
	case from.GetPhase() == done: // ended: to is from
		return to.GetPhase() == done && n == len(to.GetMessages()) && to.GetText() == from.GetText()
	case n == len(to.GetMessages()): // to is in the middle of from's response, or ended it
		if to.GetPhase() == done {
			// Ended with a final answer, or at the iteration limit, which
			// ends a round without keeping it: what is lost then is what
			// from's calls did, if any of them has a result.
			return !slices.ContainsFunc(from.GetCalls(), func(c *messages.LoopCall) bool { return c.GetResult() != nil })
		}
		if from.GetPhase() == messages.LoopPhase_LOOP_PHASE_TOOLS && to.GetPhase() != from.GetPhase() ||
			!said(to.GetText()) || len(from.GetCalls()) > len(to.GetCalls()) {
			return false
		}
		for i, c := range from.GetCalls() {
			call := to.GetCalls()[i]
			f := call.GetCall()
			if !sameCall(f.GetToolCallId(), f.GetName(), f.GetPayload(), call.GetComplete(), c) || !sameResult(call.GetResult(), c.GetResult()) {
				return false
			}
		}
		return true
	}
	// to has ended from's response: its round, the assistant message and
	// one tool message per call, follows from's messages.
	var round models.Message
	if json.Unmarshal(to.GetMessages()[n], &round) != nil || round.Role != models.RoleAssistant ||
		!said(round.Content) || len(from.GetCalls()) > len(round.ToolCalls) {
		return false
	}
	for i, c := range from.GetCalls() {
		if tc := round.ToolCalls[i]; !sameCall(tc.ID, tc.Name, tc.Arguments, true, c) {
			return false
		}
		if res := c.GetResult(); res != nil {
			var answer models.Message
			if n+1+i >= len(to.GetMessages()) || json.Unmarshal(to.GetMessages()[n+1+i], &answer) != nil ||
				answer.Role != models.RoleTool || answer.ToolCallID != c.GetCall().GetToolCallId() || answer.Content != string(res.GetPayload()) {
				return false
			}
		}
	}
	return true
}

// sameCall reports whether the call id, name, args (complete: they
// were) is the stored call c, or went on from it: a call whose arguments
// were still streaming in c has them at the start of args.
func sameCall(id, name string, args []byte, complete bool, c *messages.LoopCall) bool {
	from := c.GetCall()
	if id != from.GetToolCallId() || name != from.GetName() || c.GetComplete() && !complete {
		return false
	}
	fromArgs := from.GetPayload()
	if c.GetComplete() {
		// A message sends no arguments as {}.
		return cmp.Or(string(args), "{}") == cmp.Or(string(fromArgs), "{}")
	}
	return bytes.HasPrefix(args, fromArgs)
}

// sameResult reports whether the result res of a call is from, the
// stored one (nil: none yet); stream ids aside.
func sameResult(res, from *messages.Frame) bool {
	if from == nil {
		return true
	}
	return res != nil && res.GetToolCallId() == from.GetToolCallId() && bytes.Equal(res.GetPayload(), from.GetPayload()) &&
		res.IsErrorResult() == from.IsErrorResult() && res.GetMeta().GetFailureKind() == from.GetMeta().GetFailureKind()
}

// sameParams reports whether two sessions' PARAMs are the same, stream
// ids aside.
func sameParams(a, b []*messages.Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].GetName() != b[i].GetName() || !bytes.Equal(a[i].GetPayload(), b[i].GetPayload()) {
			return false
		}
	}
	return true
}
