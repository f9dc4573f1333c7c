package agent

import (
	"fmt"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// EventKind says what an [Event] reports.
type EventKind int

// The kinds of events.
const (
	// EventText: a delta of what the model says (Text).
	EventText EventKind = iota + 1
	// EventToolCall: the model called a tool (Call, complete arguments).
	EventToolCall
	// EventToolResult: a call got its one result (Result).
	EventToolResult
	// EventUsage: a model response's token counts (Usage).
	EventUsage
	// EventError: the attempt failed (Text says why); an EventRestart
	// follows when another attempt is made. The error that ends a
	// Stream comes in one too, with the error's text and what was
	// answered so far (Answer).
	EventError
	// EventRestart: the conversation is resumed or sent again (Attempt is
	// the new attempt's number; Text the failure that caused it; Answer
	// the rounds the new attempt goes on from).
	EventRestart
	// EventDone: the final answer (Answer), the last event.
	EventDone
	// EventFrame: a frame of the loop no other kind reports (META finish
	// or session, a tool-argument chunk, END), for hosts that show or
	// record the raw stream (Frame).
	EventFrame
)

func (k EventKind) String() string {
	switch k {
	case EventText:
		return "text"
	case EventToolCall:
		return "tool_call"
	case EventToolResult:
		return "tool_result"
	case EventUsage:
		return "usage"
	case EventError:
		return "error"
	case EventRestart:
		return "restart"
	case EventDone:
		return "done"
	case EventFrame:
		return "frame"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// Event is one step of a conversation run with [Agent.Stream]. Only the
// fields of its Kind are set.
type Event struct {
	Kind EventKind
	// Attempt is the attempt the event belongs to, from 1.
	Attempt int
	Text    string
	Call    models.ToolCall
	Result  models.ToolResult
	Usage   models.Usage
	// Answer is the final answer (EventDone), the rounds the next attempt
	// goes on from (EventRestart: without a Store, those of the failed
	// attempts whose calls all ran, which it sends again; with one, the
	// rounds the stored session has done, rebuilt from the store as
	// [Agent.Run] says, without the round the next attempt resumes, whose
	// calls it gives again), or what was answered before an error ended
	// the sequence (never nil there: empty when nothing was). Its Usage
	// sums the attempts' responses so far.
	Answer *models.Answer
	// Frame is the frame of the tool loop the event was read from (its
	// stream id is [StreamID] of the session and attempt: the session id,
	// with "#<attempt>" from the second attempt on); nil for
	// EventRestart, EventDone and a failure not told by a frame (the loop
	// stopping for good). The EventText of what the model had said in a
	// round that a resumed session gives again, which the loop does not
	// send again (see [Agent.Stream]), has a TEXT frame of the attempt's
	// stream made by the agent, so that a host folding the frames into a
	// models.Answer gets that text too.
	Frame *messages.Frame
}
