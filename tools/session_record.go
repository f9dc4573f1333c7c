package tools

import (
	"encoding/json"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// sessionRecord is the durable state of a loop session: what its stored
// events say. It changes only through apply, which the live loop calls
// for each event once the event is persisted and recovery calls for each
// stored event (and the snapshot), so the state a resumed session starts
// from is the state the live loop had persisted. The zero value is "no
// session".
type sessionRecord struct {
	started   bool
	first     []byte
	params    []*messages.Frame
	messages  []json.RawMessage
	iteration int
	phase     messages.LoopPhase
	text      []byte
	thinking  []byte        // the current response's thinking blocks, once it ended
	calls     []*recordCall // handed to the consumer, in order
	streaming []*recordCall // streaming calls not complete, in the order they started
	// cancel is the caller's cancel of the current response; nil when it
	// did not cancel it.
	cancel *messages.LoopCancel
	// marks say which results of the rounds in messages were errors, and
	// why (see resultMarks).
	marks []*messages.ResultMark
}

// recordCall is one call of the current response.
type recordCall struct {
	id    string
	name  string // of a streaming call
	index uint32 // of a streaming call
	args  []byte // of a streaming call: the chunks so far
	call  *messages.Frame
	// result is the call's result once it has one.
	result *messages.Frame
}

// frame returns the call as a TOOL_CALL: for a streaming call not yet
// complete, with the arguments received so far. It is built like the
// assembler builds a completed streaming call (PendingCall.frame).
func (rc *recordCall) frame() *messages.Frame {
	if rc.call != nil {
		return rc.call
	}
	return PendingCall{ToolCallID: rc.id, Name: rc.name, Index: rc.index, Args: rc.args}.frame()
}

func (r *sessionRecord) streamingCall(id string) (int, *recordCall) {
	for i, rc := range r.streaming {
		if rc.id == id {
			return i, rc
		}
	}
	return -1, nil
}

// apply changes the record by one stored message: an event of a session
// or a messages.LoopSession snapshot (which replaces the whole state). It
// reports false, changing nothing, for a message that is neither. An event
// that does not fit the state (a chunk for a call that is not streaming, a
// result for a call that is not there) changes nothing; the loop never
// persists one.
func (r *sessionRecord) apply(msg proto.Message) bool {
	switch m := msg.(type) {
	case *messages.LoopSession:
		r.restore(m)
	case *messages.LoopStarted:
		*r = sessionRecord{started: true, first: m.GetFirstRequest(), params: m.GetParams(),
			messages: rawMessages(m.GetMessages()), phase: messages.LoopPhase_LOOP_PHASE_MODEL}
	case *messages.LoopRequestSent:
		r.phase = messages.LoopPhase_LOOP_PHASE_MODEL
		r.text, r.thinking, r.calls, r.streaming, r.cancel = nil, nil, nil, nil, nil
	case *messages.LoopCancelled:
		r.cancel = joinCancel(r.cancel, m)
	case *messages.LoopText:
		r.text = append(r.text, m.GetText()...)
	case *messages.LoopCallStarted:
		if _, rc := r.streamingCall(m.GetToolCallId()); rc == nil {
			r.streaming = append(r.streaming, &recordCall{id: m.GetToolCallId(), name: m.GetName(), index: m.GetIndex()})
		}
	case *messages.LoopArgs:
		if _, rc := r.streamingCall(m.GetToolCallId()); rc != nil {
			if rc.args == nil {
				// The first piece is taken as it is, capped so that the next
				// copies it: an event's bytes never change once persisted.
				rc.args = slices.Clip(m.GetChunk())
			} else {
				rc.args = append(rc.args, m.GetChunk()...)
			}
		}
	case *messages.LoopCallSurfaced:
		rc := &recordCall{id: m.GetToolCallId(), call: m.GetCall(), result: m.GetResult()}
		if rc.call == nil {
			i, sc := r.streamingCall(rc.id)
			if sc == nil {
				return true
			}
			r.streaming = slices.Delete(r.streaming, i, i+1)
			rc.call = sc.frame()
		}
		r.calls = append(r.calls, rc)
	case *messages.LoopCallResult:
		id := m.GetResult().GetToolCallId()
		for _, rc := range r.calls {
			if rc.id == id && rc.result == nil {
				rc.result = m.GetResult()
				break
			}
		}
	case *messages.LoopToolsStarted:
		r.phase = messages.LoopPhase_LOOP_PHASE_TOOLS
		r.streaming = nil
		r.thinking = m.GetThinking()
	case *messages.LoopRoundEnded:
		r.iteration++
		if m.GetDone() {
			r.phase = messages.LoopPhase_LOOP_PHASE_DONE
		} else {
			calls, results := make([]*messages.Frame, len(r.calls)), make([]*messages.Frame, len(r.calls))
			for i, rc := range r.calls {
				calls[i], results[i] = rc.call, rc.result
			}
			r.marks = appendMarks(r.marks, len(r.messages)+1, results)
			r.messages = appendRound(r.messages, string(r.text), calls, results, m.GetThinking())
			r.phase = messages.LoopPhase_LOOP_PHASE_MODEL
		}
		r.text, r.thinking, r.calls, r.streaming, r.cancel = nil, nil, nil, nil, nil
	case *messages.LoopAnswered:
		r.phase = messages.LoopPhase_LOOP_PHASE_DONE
		r.calls, r.streaming, r.cancel = nil, nil, nil
	default:
		return false
	}
	return true
}

// appendMarks extends marks with those of a round's results, whose tool
// messages are at index at of the conversation and after (see
// resultMarks).
func appendMarks(marks []*messages.ResultMark, at int, results []*messages.Frame) []*messages.ResultMark {
	for i, res := range results {
		if mk := resultMark(at+i, res); mk != nil {
			marks = append(marks, mk)
		}
	}
	return marks
}

// resultMark returns the mark of result res, whose tool message is at
// index at of the conversation: what the tool message does not say of
// it, whether it was an error result and its failure kind; nil for a
// result with neither, which needs no mark.
func resultMark(at int, res *messages.Frame) *messages.ResultMark {
	kind := res.GetMeta().GetFailureKind()
	if !res.IsErrorResult() && kind == "" {
		return nil
	}
	return &messages.ResultMark{Message: uint32(at), ToolCallId: res.GetToolCallId(), IsError: res.IsErrorResult(), FailureKind: kind}
}

// joinCancel returns the cancel of a response after the caller's cancel
// e: a new value (the record's bytes never change once persisted).
func joinCancel(old *messages.LoopCancel, e *messages.LoopCancelled) *messages.LoopCancel {
	c := &messages.LoopCancel{Stopped: old.GetStopped(), Aborted: old.GetAborted(), Calls: slices.Clone(old.GetCalls())}
	switch {
	case e.GetAbort():
		c.Stopped, c.Aborted = true, true
	case e.GetToolCallId() == "":
		c.Stopped = true
	case !slices.Contains(c.Calls, e.GetToolCallId()):
		c.Calls = append(c.Calls, e.GetToolCallId())
	}
	return c
}

// cancels reports whether the caller's cancel of a response (nil: none)
// covers its call id that has no result, as the live loop would have
// answered it: complete says the call's arguments were complete, ended
// that the response had ended (its calls started). A CANCEL of the stream
// or an ABORT covers every call; a CANCEL naming a call covers that call
// once the response ended, and before that every complete call (the loop
// stops after the response and runs none of them). A call still streaming
// that only a named CANCEL reached is not covered: the model went on.
func cancels(c *messages.LoopCancel, id string, complete, ended bool) bool {
	switch {
	case c == nil:
		return false
	case c.GetStopped():
		return true
	case !complete:
		return false
	case !ended:
		return len(c.GetCalls()) > 0
	}
	return slices.Contains(c.GetCalls(), id)
}

// cancelledResult is the result of a call the caller's CANCEL (aborted
// false) or ABORT covers when its tool does not answer it. Every path
// that answers such a call gives it (the live loop, its failure, OnFailure
// and a resumed session), so a caller and a resume see one text: what a
// tool answers a cancelled call (cancelledText); a call whose arguments
// were not complete was cut short.
func cancelledResult(call *messages.Frame, aborted, complete bool) *messages.Frame {
	if !complete {
		return cutShort(call, aborted)
	}
	return errorResult(call, FailureCancelled, cancelledText(aborted))
}

// cancelledText is the error text of a cancelled call: what a tool's
// duplex answers to CANCEL (aborted false) or ABORT.
func cancelledText(aborted bool) string {
	if aborted {
		return "Tool call aborted"
	}
	return "Tool call cancelled"
}

// appendRound extends a conversation with one tool round: the assistant
// message (the response's text, its calls and thinking blocks) and one
// tool message per call, in call order. The live loop and the session
// record both build the follow-up with it.
// The messages are encoded into one allocation.
func appendRound(list []json.RawMessage, text string, calls, results []*messages.Frame, thinking json.RawMessage) []json.RawMessage {
	var few [4]models.ToolCall // most responses make few calls: no list to allocate
	am := assistantMessage(text, calls, thinking, &few)
	n := am.EncodedLen()
	for _, r := range results {
		n += toolMessage(r).EncodedLen()
	}
	buf := am.AppendJSON(make([]byte, 0, n))
	list = append(list, buf[:len(buf):len(buf)])
	for _, r := range results {
		start := len(buf)
		buf = toolMessage(r).AppendJSON(buf)
		list = append(list, buf[start:len(buf):len(buf)])
	}
	return list
}

// joinRound is appendRound and the join of the follow-up's "messages"
// in one buffer: the JSON array of list's messages, the round's and, when
// not nil, final (a system message the follow-up alone carries). The
// round's messages are appended to list, and every element of list,
// old and new, becomes a slice of the payload, so that the buffers of the
// requests before are not kept for the messages they repeat. The payload
// is sent in a frame, and so never changed.
func joinRound(list []json.RawMessage, text string, calls, results []*messages.Frame, thinking, final json.RawMessage) (json.RawMessage, []json.RawMessage) {
	var few [4]models.ToolCall // most responses make few calls: no list to allocate
	am := assistantMessage(text, calls, thinking, &few)
	n := len("[]") + am.EncodedLen()
	for _, m := range list {
		n += max(len(m), len("null")) + 1
	}
	for _, r := range results {
		n += 1 + toolMessage(r).EncodedLen()
	}
	if final != nil {
		n += 1 + len(final)
	}
	b := append(make([]byte, 0, n), '[')
	for i, m := range list {
		if len(m) == 0 {
			m = json.RawMessage("null")
		}
		start := len(b)
		b = append(b, m...)
		list[i] = b[start:len(b):len(b)]
		b = append(b, ',')
	}
	start := len(b)
	b = am.AppendJSON(b)
	list = append(list, b[start:len(b):len(b)])
	for _, r := range results {
		b = append(b, ',')
		start := len(b)
		b = toolMessage(r).AppendJSON(b)
		list = append(list, b[start:len(b):len(b)])
	}
	if final != nil {
		b = append(append(b, ','), final...)
	}
	return append(b, ']'), list
}

func rawMessages(b [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(b))
	for i, m := range b {
		out[i] = m
	}
	return out
}

// state returns the record as a snapshot (sharing its bytes: marshal it
// before the record changes). Streaming calls follow the handed-out ones,
// with complete unset.
func (r *sessionRecord) state(id string, steps uint64) *messages.LoopSession {
	st := &messages.LoopSession{SessionId: id, FirstRequest: r.first, Params: r.params,
		Iteration: uint32(r.iteration), Phase: r.phase, Text: string(r.text), Steps: steps, Thinking: r.thinking,
		Cancel: r.cancel, ResultMarks: slices.Clip(r.marks)}
	st.Messages = make([][]byte, len(r.messages))
	for i, m := range r.messages {
		st.Messages[i] = m
	}
	for _, rc := range r.calls {
		st.Calls = append(st.Calls, &messages.LoopCall{Call: rc.call, Complete: true, Result: rc.result})
	}
	for _, rc := range r.streaming {
		st.Calls = append(st.Calls, &messages.LoopCall{Call: rc.frame()})
	}
	return st
}

// restore replaces the record with a snapshot's state.
func (r *sessionRecord) restore(st *messages.LoopSession) {
	*r = sessionRecord{started: true, first: st.GetFirstRequest(), params: st.GetParams(),
		messages: rawMessages(st.GetMessages()), iteration: int(st.GetIteration()), phase: st.GetPhase(),
		text: []byte(st.GetText()), thinking: st.GetThinking(), cancel: st.GetCancel(),
		marks: slices.Clip(st.GetResultMarks())}
	for _, lc := range st.GetCalls() {
		f := lc.GetCall()
		rc := &recordCall{id: f.GetToolCallId(), result: lc.GetResult()}
		if lc.GetComplete() || lc.GetResult() != nil {
			rc.call = f
			r.calls = append(r.calls, rc)
			continue
		}
		rc.name, rc.index, rc.args = f.GetName(), f.GetMeta().GetIndex(), slices.Clone(f.GetPayload())
		r.streaming = append(r.streaming, rc)
	}
}

// startedEvent is the event of a session's first request going to the
// model.
func (s *loopSession) startedEvent(id string) *messages.LoopStarted {
	e := &messages.LoopStarted{SessionId: id, FirstRequest: s.first, Params: slices.Clone(s.params),
		Messages: make([][]byte, len(s.messages))}
	for i, m := range s.messages {
		e.Messages[i] = m
	}
	return e
}

// surfacedEvent is the event of call being handed out, made by response
// frame f: an atomic TOOL_CALL is stored whole; a streaming call (f
// completed it, or ended its stream) is named only, its frame being
// rebuilt from its stored chunks.
func surfacedEvent(f, call, result *messages.Frame) *messages.LoopCallSurfaced {
	e := &messages.LoopCallSurfaced{ToolCallId: call.GetToolCallId(), Result: result}
	if call == f {
		e.Call = call
	}
	return e
}
