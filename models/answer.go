package models

import (
	"encoding/json"
	"slices"

	"github.com/polyweave/polyweave-go/messages"
)

// Usage is the token counts of a META usage frame. Counts a model does not
// report are zero.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens, u.TotalTokens + o.TotalTokens}
}

// ToolResult is the answer a tool call got.
type ToolResult struct {
	CallID string
	Name   string
	// Content is the TOOL_RESULT payload: the JSON the model reads.
	Content json.RawMessage
	// IsError tells an error result ({"success":false,"error":...}), and
	// FailureKind says why when the stage that made it told (the
	// tools.FailureKind names).
	IsError     bool
	FailureKind string
}

// Round is one model response that made tool calls, with their results.
type Round struct {
	// Text is what the model said in that response, along with its calls.
	Text string
	// Calls are the calls, in call order; Results their answers, in the
	// same order once complete.
	Calls   []ToolCall
	Results []ToolResult
}

// Complete reports whether every call of r has its result.
func (r *Round) Complete() bool { return len(r.Calls) > 0 && len(r.Results) == len(r.Calls) }

// Messages returns r as the messages a tool loop adds to the conversation:
// the assistant message with its calls, then one tool message per call in
// call order (calls still without a result are left out).
func (r *Round) Messages() []Message {
	out := make([]Message, 0, 1+len(r.Calls))
	out = append(out, AssistantMessage(r.Text, r.Calls...))
	for _, res := range r.Results {
		out = append(out, ToolMessage(res.CallID, res.Content))
	}
	return out
}

// Answer reads the frames a tool loop emits for one stream (text, tool
// calls with their results, META usage and finish, then END, or ERROR then
// END) into the whole conversation's outcome: the final answer apart from
// what the model said along the way, every tool round, the summed usage
// and the last finish reason.
//
// The zero Answer is ready and takes the stream id of its first frame. It
// is not safe for concurrent use, and a copy of an Answer in use must not
// be given more frames (copies share its storage).
type Answer struct {
	StreamID string
	// Text is the final answer: the text of the model's last response,
	// the one without tool calls. It stays empty when the conversation
	// ended otherwise (a failure, or calls past the iteration limit).
	Text string
	// Rounds are the responses with tool calls, in order.
	Rounds []Round
	// Usage sums the META usage frames; Finish is the last finish reason.
	Usage  Usage
	Finish string
	// Error is the text of the ERROR frame; Failed tells there was one.
	Error  string
	Failed bool
	// Answered tells the model gave its final answer: its last response
	// made no tool calls and the stream did not fail.
	Answered bool
	// Ended is set by the END frame.
	Ended bool

	cur  Round
	text pieces // what the current response said
	// room holds the rounds, calls and results of a short conversation in
	// one allocation, taken at its first call; callRoom and resultRoom are
	// the parts of it not handed out yet.
	room       *answerRoom
	callRoom   []ToolCall
	resultRoom []ToolResult
}

// NewAnswer returns an Answer for the stream streamID with its room for
// the rounds of a short conversation in the same allocation (1152 bytes
// with the runtime's header: keep it within that size class): what the
// zero Answer allocates at its first tool call.
func NewAnswer(streamID string) *Answer {
	r := &answerWithRoom{}
	r.StreamID, r.room = streamID, &r.store
	r.callRoom, r.resultRoom, r.Rounds = r.store.calls[:], r.store.results[:], r.store.rounds[:0]
	return &r.Answer
}

type answerWithRoom struct {
	Answer
	store answerRoom
}

// answerRoom is the storage of a conversation of up to four rounds of
// one call each (more take more allocations).
type answerRoom struct {
	rounds  [4]Round
	calls   [4]ToolCall
	results [4]ToolResult
}

// pieces gathers a response's text deltas: one delta is kept as it came
// (most answers come in one), more are copied into buf.
type pieces struct {
	one string
	buf []byte // holds the text so far once a second delta came
}

func (p *pieces) add(s string) {
	if len(p.buf) == 0 {
		if p.one == "" {
			p.one = s
			return
		}
		p.buf = append(p.buf, p.one...)
	}
	p.buf = append(p.buf, s...)
}

// take returns the text and starts over (keeping buf for the next).
func (p *pieces) take() string {
	s := p.one
	if len(p.buf) > 0 {
		s = string(p.buf)
	}
	p.one, p.buf = "", p.buf[:0]
	return s
}

// Add folds one frame of the stream into the answer. Frames of other
// streams and frames after END are ignored. TOOL_RESULT frames are matched
// to their calls by id; a result for no known call, or for a call already
// answered, is ignored.
func (a *Answer) Add(f *messages.Frame) {
	if a.StreamID == "" {
		a.StreamID = f.GetStreamId()
	}
	if a.Ended || f.GetStreamId() != a.StreamID {
		return
	}
	switch f.GetType() {
	case messages.FrameType_TEXT:
		if f.IsToolArgChunk() {
			return
		}
		if a.cur.Complete() {
			a.commit()
		}
		a.text.add(f.GetText())
	case messages.FrameType_TOOL_CALL:
		if a.cur.Complete() {
			a.commit()
		}
		if a.cur.Calls == nil {
			a.reserve()
			a.cur.Calls = a.callRoom[:0]
		}
		a.cur.Calls = append(a.cur.Calls, ToolCall{Index: len(a.cur.Calls), ID: f.GetToolCallId(),
			Name: f.GetName(), Arguments: f.GetPayload()})
	case messages.FrameType_TOOL_RESULT:
		a.result(f)
	case messages.FrameType_META:
		switch f.GetName() {
		case MetaUsage:
			var u Usage
			if json.Unmarshal(f.GetPayload(), &u) == nil {
				a.Usage = a.Usage.Add(u)
			}
		case MetaFinish:
			if reason, ok := jsonString(f.GetPayload()); ok {
				a.Finish = reason
			}
		}
	case messages.FrameType_ERROR:
		a.Failed, a.Error = true, f.GetText()
	case messages.FrameType_END:
		a.Ended = true
		if len(a.cur.Calls) == 0 {
			text := a.text.take()
			if !a.Failed {
				a.Text, a.Answered = text, true
			}
			return
		}
		a.commit()
	}
}

func (a *Answer) result(f *messages.Frame) {
	id := f.GetToolCallId()
	calls, results := a.cur.Calls, a.cur.Results
	// Results come in call order from a tool loop: the next call's is
	// the common case, appended as it is.
	k := len(results)
	inOrder := k < len(calls) && calls[k].ID == id && (k == 0 || results[k-1].CallID == calls[k-1].ID)
	if inOrder {
		// The results so far are kept in call order, one a call, the
		// last that of call k-1: they are those of calls 0 to k-1. Then
		// this one is new unless an earlier call has its id.
		for _, c := range calls[:k] {
			if c.ID == id {
				inOrder = false
				break
			}
		}
	}
	idx := k
	if !inOrder {
		idx = a.callIndex(id)
		if idx < 0 || slices.ContainsFunc(results, func(r ToolResult) bool { return r.CallID == id }) {
			return // no such call, or answered already: one result per call
		}
	}
	if results == nil {
		if len(a.resultRoom) >= len(calls) {
			results = a.resultRoom[:0]
		} else {
			results = make([]ToolResult, 0, len(calls))
		}
	}
	results = append(results, ToolResult{CallID: id, Name: f.GetName(), Content: f.GetPayload()})
	if m := f.GetMeta(); m != nil {
		last := &results[len(results)-1]
		last.IsError, last.FailureKind = f.IsErrorResult(), m.GetFailureKind()
	}
	// Keep the call order whatever order the results come in.
	for i := len(results) - 1; !inOrder && i > 0 && a.callIndex(results[i-1].CallID) > idx; i-- {
		results[i], results[i-1] = results[i-1], results[i]
	}
	a.cur.Results = results
}

func (a *Answer) callIndex(id string) int {
	for i, c := range a.cur.Calls {
		if c.ID == id {
			return i
		}
	}
	return -1
}

// reserve takes the answer's room at its first call.
func (a *Answer) reserve() {
	if a.room != nil {
		return
	}
	a.room = &answerRoom{}
	a.callRoom, a.resultRoom = a.room.calls[:], a.room.results[:]
	if a.Rounds == nil {
		a.Rounds = a.room.rounds[:0]
	}
}

// commit closes the current round.
func (a *Answer) commit() {
	a.cur.Text = a.text.take()
	a.cur.Calls = takeRoom(&a.callRoom, a.cur.Calls)
	a.cur.Results = takeRoom(&a.resultRoom, a.cur.Results)
	a.Rounds = append(a.Rounds, a.cur)
	a.cur = Round{}
}

// takeRoom closes s, a round's list: when s lies at the front of room,
// room moves past it. s is returned with its capacity cut to its length,
// so that appending to a round never writes over room.
func takeRoom[T any](room *[]T, s []T) []T {
	if len(s) > 0 && len(*room) >= len(s) && &s[0] == &(*room)[0] {
		*room = (*room)[len(s):]
	}
	return s[:len(s):len(s)]
}

// jsonString decodes a JSON string; a plain one (no escapes, the usual
// finish reason) without encoding/json's reflection.
func jsonString(raw []byte) (string, bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		plain := true
		for _, c := range raw[1 : n-1] {
			if c == '\\' || c == '"' || c < 0x20 {
				plain = false
				break
			}
		}
		if plain {
			return finishReason(raw[1 : n-1]), true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// finishReason returns b as a string, the reasons the adapters report
// without allocating one.
func finishReason(b []byte) string {
	switch string(b) {
	case "stop":
		return "stop"
	case "tool_calls":
		return "tool_calls"
	case "length":
		return "length"
	case "content_filter":
		return "content_filter"
	case "end_turn":
		return "end_turn"
	case "tool_use":
		return "tool_use"
	case "max_tokens":
		return "max_tokens"
	}
	return string(b)
}

// ToolCalls counts the calls of every round.
func (a *Answer) ToolCalls() int {
	n := 0
	for _, r := range a.Rounds {
		n += len(r.Calls)
	}
	return n
}

// FailedCalls counts the error results of every round.
func (a *Answer) FailedCalls() int {
	n := 0
	for _, r := range a.Rounds {
		for _, res := range r.Results {
			if res.IsError {
				n++
			}
		}
	}
	return n
}

// Messages returns the messages the conversation added, as a tool loop
// sends them to the model: each complete round (see [Round.Messages]),
// then the final answer as an assistant message when there is one.
func (a *Answer) Messages() []Message {
	var out []Message
	for i := range a.Rounds {
		if a.Rounds[i].Complete() {
			out = append(out, a.Rounds[i].Messages()...)
		}
	}
	if a.Answered {
		out = append(out, AssistantMessage(a.Text))
	}
	return out
}
