package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/polyweave/polyweave-go/models"
)

// Errors a streamed answer can end with. The ERROR frame of a failed
// request carries their text; [Accumulator.Result] returns them wrapped
// with detail, for errors.Is.
var (
	// ErrIncomplete: the stream ended before message_stop, so nothing
	// proves the answer is whole.
	ErrIncomplete = errors.New("stream ended without message_stop")
	// ErrInvalidToolCall: a finished tool_use block without a name or id,
	// or whose input is not a JSON object.
	ErrInvalidToolCall = errors.New("invalid tool call")
	// ErrProtocol: events out of order (a delta for a block never
	// started, a second message_start, ...).
	ErrProtocol = errors.New("stream breaks the Messages API event order")
)

// Finish reasons of the stop reasons the Messages API sends: the META
// finish frame uses the vocabulary of package models. Other stop reasons
// (pause_turn, ...) are passed through as they are.
var finishReasons = map[string]string{
	"end_turn":                      "stop",
	"stop_sequence":                 "stop",
	"tool_use":                      "tool_calls",
	"max_tokens":                    "length",
	"model_context_window_exceeded": "length",
	"refusal":                       "content_filter",
}

// Result is a finished answer as the accumulator read it.
type Result struct {
	// ToolCalls are the tool_use blocks in block order (Index is the
	// position among the calls).
	ToolCalls []models.ToolCall
	// Truncated are the tool_use blocks the length limit cut off (stop
	// reason max_tokens while they were open), with the input received
	// so far; they are never repaired into calls. Their Index follows
	// the whole calls'. A block cut without an id or a name is in
	// neither list.
	Truncated []models.ToolCall
	// Thinking is the thinking and redacted_thinking blocks, complete
	// with their signatures, as a JSON array to send back in the
	// assistant message of a follow-up (thinking_blocks); nil when none.
	Thinking json.RawMessage
	// StopReason is the Messages API's stop reason; Finish its name in
	// the vocabulary of package models.
	StopReason string
	Finish     string
	// Usage is the token counts in the vocabulary of package models
	// (prompt_tokens, completion_tokens, total_tokens, with the cache
	// counts), nil when the stream carried none.
	Usage json.RawMessage
}

// Accumulator folds the events of one streamed Messages API answer into
// its blocks. Blocks are keyed by their index, never by arrival order, so
// deltas of several blocks may interleave. A tool_use block's input is
// the concatenation of its input_json_delta pieces, parsed at its
// content_block_stop (empty means {}); a block never stopped is cut off.
//
// Its zero value is ready. It is not safe for concurrent use: one
// goroutine reads one stream.
type Accumulator struct {
	started bool
	stopped bool
	blocks  map[int64]*block
	order   []int64 // block indexes in order of content_block_start
	stop    string
	usage   usage
	err     error
}

type block struct {
	kind      string // text, thinking, redacted_thinking, tool_use, or another
	id, name  string
	input     []byte
	thinking  []byte
	signature string
	data      string // redacted_thinking
	done      bool
}

type usage struct {
	seen                                 bool
	input, output, cacheWrite, cacheRead int64
}

// Add folds one event in and returns the text it carried (a text_delta, or
// the initial text of a text block), to be streamed. It returns an error
// wrapping ErrProtocol for an event out of order; the accumulator then
// refuses further events.
func (a *Accumulator) Add(ev *sdk.MessageStreamEventUnion) (string, error) {
	if a.err != nil {
		return "", a.err
	}
	bad := func(format string, args ...any) (string, error) {
		a.err = fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
		return "", a.err
	}
	switch ev.Type {
	case "message_start":
		if a.started {
			return bad("a second message_start")
		}
		a.started = true
		u := ev.Message.Usage
		a.usage = usage{seen: ev.Message.JSON.Usage.Valid(), input: u.InputTokens, output: u.OutputTokens,
			cacheWrite: u.CacheCreationInputTokens, cacheRead: u.CacheReadInputTokens}
	case "content_block_start":
		if !a.started || a.stopped {
			return bad("content_block_start outside a message")
		}
		if _, dup := a.blocks[ev.Index]; dup {
			return bad("block %d started twice", ev.Index)
		}
		cb := &ev.ContentBlock
		b := &block{kind: cb.Type, id: cb.ID, name: cb.Name, thinking: []byte(cb.Thinking), signature: cb.Signature, data: cb.Data}
		if b.kind == "tool_use" {
			// The start event's input is {} for a streamed input; a server
			// sending the whole input at once puts it here instead.
			if raw := cb.JSON.Input.Raw(); raw != "" && raw != "{}" && raw != "null" {
				b.input = []byte(raw)
			}
		}
		if a.blocks == nil {
			a.blocks = make(map[int64]*block)
		}
		a.blocks[ev.Index] = b
		a.order = append(a.order, ev.Index)
		if b.kind == "text" {
			return cb.Text, nil
		}
	case "content_block_delta":
		b, ok := a.blocks[ev.Index]
		if !ok || b.done {
			return bad("delta for block %d, which is not open", ev.Index)
		}
		d := &ev.Delta
		switch d.Type {
		case "text_delta":
			if b.kind == "text" {
				return d.Text, nil
			}
		case "input_json_delta":
			b.input = append(b.input, d.PartialJSON...)
		case "thinking_delta":
			b.thinking = append(b.thinking, d.Thinking...)
		case "signature_delta":
			b.signature += d.Signature
		}
	case "content_block_stop":
		b, ok := a.blocks[ev.Index]
		if !ok || b.done {
			return bad("stop for block %d, which is not open", ev.Index)
		}
		b.done = true
	case "message_delta":
		if !a.started {
			return bad("message_delta before message_start")
		}
		if r := string(ev.Delta.StopReason); r != "" {
			a.stop = r
		}
		// The counts of message_delta are cumulative: each one present
		// replaces the one of message_start.
		u := &ev.Usage
		if ev.JSON.Usage.Valid() {
			a.usage.seen = true
			a.usage.output = u.OutputTokens
			if u.JSON.InputTokens.Valid() && u.InputTokens > 0 {
				a.usage.input = u.InputTokens
			}
			if u.JSON.CacheCreationInputTokens.Valid() && u.CacheCreationInputTokens > 0 {
				a.usage.cacheWrite = u.CacheCreationInputTokens
			}
			if u.JSON.CacheReadInputTokens.Valid() && u.CacheReadInputTokens > 0 {
				a.usage.cacheRead = u.CacheReadInputTokens
			}
		}
	case "message_stop":
		if !a.started {
			return bad("message_stop before message_start")
		}
		a.stopped = true
	}
	return "", nil
}

// Result checks that the stream finished properly and returns the answer:
// ErrIncomplete without message_stop, ErrInvalidToolCall for a call
// without id or name, with the id of another, whose input is not a JSON object, or still open
// when the stop reason is not the length limit. A tool_use block still
// open at max_tokens is returned in Truncated, whatever input it received
// (none at all too); one without id or name is dropped (a follow-up could
// not name it), as the OpenAI-compatible adapter drops a call cut before
// its name. A refusal ends the answer without its tool calls.
func (a *Accumulator) Result() (Result, error) {
	if a.err != nil {
		return Result{}, a.err
	}
	if !a.stopped {
		return Result{}, fmt.Errorf("%w (cut off)", ErrIncomplete)
	}
	res := Result{StopReason: a.stop, Finish: a.stop}
	if f, ok := finishReasons[a.stop]; ok {
		res.Finish = f
	}
	if res.Finish == "" {
		res.Finish = "stop"
	}
	if a.usage.seen {
		res.Usage = a.usage.encode()
	}
	var thinking []json.RawMessage
	seen := make(map[string]int64) // tool_use ids, to their block
	order := slices.Clone(a.order)
	slices.Sort(order)
	for _, idx := range order {
		b := a.blocks[idx]
		switch b.kind {
		case "thinking":
			if b.done {
				thinking = append(thinking, marshal(map[string]string{"type": "thinking", "thinking": string(b.thinking), "signature": b.signature}))
			}
		case "redacted_thinking":
			if b.done {
				thinking = append(thinking, marshal(map[string]string{"type": "redacted_thinking", "data": b.data}))
			}
		case "tool_use":
			if a.stop == "refusal" {
				continue
			}
			if b.id == "" || b.name == "" {
				if !b.done && res.Finish == "length" {
					continue // cut off, and nothing can name it to the model
				}
				return Result{}, fmt.Errorf("%w: block %d has no id or name", ErrInvalidToolCall, idx)
			}
			if at, dup := seen[b.id]; dup {
				return Result{}, fmt.Errorf("%w: blocks %d (%s) and %d (%s) share the id %q",
					ErrInvalidToolCall, at, a.blocks[at].name, idx, b.name, b.id)
			}
			seen[b.id] = idx
			if !b.done {
				if res.Finish != "length" {
					return Result{}, fmt.Errorf("%w: call %q to %s never ended (stop reason %q)", ErrInvalidToolCall, b.id, b.name, a.stop)
				}
				res.Truncated = append(res.Truncated, models.ToolCall{ID: b.id, Name: b.name, Arguments: b.input})
				continue
			}
			args := b.input
			if len(args) == 0 {
				args = []byte("{}")
			} else if !isObject(args) {
				return Result{}, fmt.Errorf("%w: call %q (%s) has an input that is not a JSON object: %q", ErrInvalidToolCall, b.id, b.name, args)
			}
			res.ToolCalls = append(res.ToolCalls, models.ToolCall{Index: len(res.ToolCalls), ID: b.id, Name: b.name, Arguments: args})
		}
	}
	for i := range res.Truncated {
		res.Truncated[i].Index = len(res.ToolCalls) + i // after the whole calls (see models.MetaTruncatedCall)
	}
	if len(thinking) > 0 {
		res.Thinking = marshal(thinking)
	}
	return res, nil
}

func isObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// encode writes the counts in the vocabulary of package models: prompt
// tokens count the cached ones too, as OpenAI's do; the Messages API's
// own counts follow.
func (u usage) encode() json.RawMessage {
	prompt := u.input + u.cacheWrite + u.cacheRead
	return marshal(struct {
		Prompt     int64 `json:"prompt_tokens"`
		Completion int64 `json:"completion_tokens"`
		Total      int64 `json:"total_tokens"`
		Details    struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		Input      int64 `json:"input_tokens"`
		Output     int64 `json:"output_tokens"`
		CacheWrite int64 `json:"cache_creation_input_tokens"`
		CacheRead  int64 `json:"cache_read_input_tokens"`
	}{Prompt: prompt, Completion: u.output, Total: prompt + u.output,
		Details: struct {
			Cached int64 `json:"cached_tokens"`
		}{u.cacheRead},
		Input: u.input, Output: u.output, CacheWrite: u.cacheWrite, CacheRead: u.cacheRead})
}
