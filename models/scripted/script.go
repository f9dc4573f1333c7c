package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
	"unicode/utf8"

	"github.com/polyweave/polyweave-go/models"
)

// Selection says how a request picks the turn that answers it.
type Selection string

const (
	// BySequence answers the n-th request the model receives (counted over
	// every adapter and stream it backs) with turn n. It is the default.
	BySequence Selection = "sequence"
	// ByConversation answers a request whose "messages" hold n assistant
	// messages with turn n: a fresh conversation gets turn 0, its first
	// follow-up turn 1, and so on. Many conversations can share one script,
	// and a request sent again after a crash gets the same turn.
	ByConversation Selection = "conversation"
)

// Script is what a scripted model says, turn by turn. The zero value has
// no turns; [New] rejects it. A Script is plain data: it is copied by New
// and may be reused.
//
// In JSON (see [Parse]) durations are strings such as "50ms", and tool
// arguments are either a JSON value (an object, usually) or a string
// holding the exact argument text:
//
//	{"select": "conversation", "turns": [
//	  {"text": "Let me write it.", "deltas": 3,
//	   "tool_calls": [{"id": "call_1", "name": "write_file",
//	                   "arguments": {"path": "main.go", "content": "..."}, "split": 4}]},
//	  {"text": "Done.", "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}}
//	]}
type Script struct {
	// Select chooses how requests pick turns; empty means BySequence.
	Select Selection `json:"select,omitempty"`
	// Repeat starts over with the first turn once the turns are used up
	// (turn index modulo the number of turns). Without it a request past
	// the last turn is answered with ERROR("script exhausted ...") + END,
	// the ERROR of failure kind models.FailurePermanent: asking again
	// cannot succeed, so consumers (an agent's attempts) do not retry it.
	Repeat bool   `json:"repeat,omitempty"`
	Turns  []Turn `json:"turns"`
}

// Turn is one response of the model. Its frames come out in this order:
// the text (split into Deltas TEXT frames), the tool calls in order, then
// either META thinking_blocks (when Thinking is set), META usage (when
// Usage is set), META finish and END, or, when
// Error is set, ERROR and END.
//
// Time is an input, never a sleep: Delay and Pace are waited for with
// actor timers (actors.Context.After), so tests running in a
// testing/synctest bubble see them pass instantly. They are zero by
// default: a turn is then emitted whole within one actor step.
type Turn struct {
	// Delay is waited for before the first frame.
	Delay time.Duration `json:"-"`
	// Pace is waited for between two frames of the turn (text deltas,
	// calls, argument chunks), to make a slow stream.
	Pace time.Duration `json:"-"`

	// Text is the assistant's content; empty means none.
	Text string `json:"text,omitempty"`
	// Deltas splits Text into that many TEXT frames of about equal size
	// (never inside a UTF-8 character); 0 or 1 means one frame.
	Deltas int `json:"deltas,omitempty"`

	// ToolCalls are the calls of the turn (parallel calls when several).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Interleave sends the argument chunks of streaming calls round-robin
	// (all calls open first, then one chunk of each in turn) instead of
	// one call after the other.
	Interleave bool `json:"interleave,omitempty"`

	// Thinking, when set, is the payload of a META thinking_blocks frame
	// (models.MetaThinkingBlocks: reasoning blocks a follow-up must send
	// back), a JSON array.
	Thinking json.RawMessage `json:"thinking_blocks,omitempty"`
	// Usage, when set, is reported in a META usage frame.
	Usage *Usage `json:"usage,omitempty"`
	// Finish is the finish reason; empty means "tool_calls" when the turn
	// has calls and "stop" otherwise.
	Finish string `json:"finish,omitempty"`
	// Error, when set, makes the turn fail: after the text and calls it
	// ends with ERROR(Error) and END instead of META finish.
	Error string `json:"error,omitempty"`
	// Stall makes the turn stop after its text and calls and never finish:
	// only CANCEL, ABORT or the adapter stopping ends it. For testing
	// cancellation.
	Stall bool `json:"stall,omitempty"`
}

// ToolCall is one call of a turn. It is emitted atomically (one TOOL_CALL
// with the arguments) unless Chunks or Split ask for a streaming call.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments; empty means {}.
	Arguments string `json:"-"`
	// Chunks streams the call with exactly these argument pieces. When
	// Arguments is empty it is their concatenation; otherwise they must
	// concatenate to it.
	Chunks []string `json:"chunks,omitempty"`
	// Split streams the call with Arguments cut into that many pieces of
	// about equal size (never inside a UTF-8 character); 0 or 1 means
	// atomic unless Chunks is set.
	Split int `json:"split,omitempty"`
	// Raw emits Arguments exactly as written, even empty or invalid JSON,
	// to test how consumers cope with bad arguments. Without Raw, Arguments
	// must be valid JSON and empty arguments are sent as {}.
	Raw bool `json:"raw,omitempty"`
}

// Usage is the token counts a turn reports, encoded as OpenAI does.
type Usage = models.Usage

// turnJSON is the JSON form of Turn: durations as strings.
type turnJSON struct {
	turnAlias
	Delay string `json:"delay,omitempty"`
	Pace  string `json:"pace,omitempty"`
}

type turnAlias Turn

// UnmarshalJSON reads a turn with durations written as "50ms".
func (t *Turn) UnmarshalJSON(data []byte) error {
	var j turnJSON
	if err := strictUnmarshal(data, &j); err != nil {
		return err
	}
	*t = Turn(j.turnAlias)
	var err error
	if t.Delay, err = parseDuration(j.Delay); err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	if t.Pace, err = parseDuration(j.Pace); err != nil {
		return fmt.Errorf("pace: %w", err)
	}
	return nil
}

// MarshalJSON writes a turn with durations as strings.
func (t Turn) MarshalJSON() ([]byte, error) {
	j := turnJSON{turnAlias: turnAlias(t)}
	if t.Delay != 0 {
		j.Delay = t.Delay.String()
	}
	if t.Pace != 0 {
		j.Pace = t.Pace.String()
	}
	return json.Marshal(j)
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

type toolCallJSON struct {
	toolCallAlias
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type toolCallAlias ToolCall

// UnmarshalJSON reads a call whose arguments are a JSON value or a string
// holding the exact argument text.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var j toolCallJSON
	if err := strictUnmarshal(data, &j); err != nil {
		return err
	}
	*c = ToolCall(j.toolCallAlias)
	args := bytes.TrimSpace(j.Arguments)
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
	case args[0] == '"':
		if err := json.Unmarshal(args, &c.Arguments); err != nil {
			return fmt.Errorf("arguments: %w", err)
		}
	default:
		c.Arguments = string(args)
	}
	return nil
}

// MarshalJSON writes the arguments as a JSON value when they are valid
// JSON, and as a string otherwise.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	j := toolCallJSON{toolCallAlias: toolCallAlias(c)}
	switch {
	case c.Arguments == "":
	case json.Valid([]byte(c.Arguments)) && !c.Raw:
		j.Arguments = json.RawMessage(c.Arguments)
	default:
		s, err := json.Marshal(c.Arguments)
		if err != nil {
			return nil, err
		}
		j.Arguments = s
	}
	return json.Marshal(j)
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Parse reads a script written as JSON (see [Script]). Unknown fields are
// errors, so that a typo does not silently change a script.
func Parse(data []byte) (Script, error) {
	var s Script
	if err := strictUnmarshal(data, &s); err != nil {
		return Script{}, fmt.Errorf("parse script: %w", err)
	}
	return s, nil
}

// Load reads a script from a JSON file.
func Load(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("load script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return Script{}, fmt.Errorf("load script %s: %w", path, err)
	}
	return s, nil
}

// Split cuts s into n pieces of about equal size, never inside a UTF-8
// character (fewer when s is too short), as a turn's Deltas and a call's
// Split do. Code that renders turns in another wire format uses it to cut
// them the same way.
func Split(s string, n int) []string {
	if n <= 1 || len(s) <= 1 {
		return []string{s}
	}
	out := make([]string, 0, n)
	size := max(1, len(s)/n)
	for len(s) > 0 && len(out) < n-1 {
		cut := min(size, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}
