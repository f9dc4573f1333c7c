package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	sdk "github.com/openai/openai-go/v3"

	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
)

// Errors a streamed answer can end with. The ERROR frame of a failed
// request carries their text; [Accumulator.Result] returns them wrapped
// with detail, for errors.Is.
var (
	// ErrIncomplete: the stream ended (cut off, or [DONE]) before a
	// finish_reason arrived, so nothing proves the answer is whole.
	ErrIncomplete = errors.New("stream ended without a finish reason")
	// ErrInvalidToolCall: a finished tool call has no name or arguments
	// that are not JSON, or two calls share an id.
	ErrInvalidToolCall = errors.New("invalid tool call")
)

// ServerError is an error object the server sent inside the stream
// (`data: {"error": {...}}`, or `data: {"error": "message"}`). Its text
// is the start of the message, or, when the object has none, the quoted
// start of the object.
type ServerError struct {
	// Raw is the error object as received. In the error of an answer, it
	// is the object with the request's credentials cut out of its strings
	// as they read decoded (and of its numbers), as the answer's text has
	// them cut out: valid JSON, compact, in the order it came.
	Raw json.RawMessage
	// Message is its "message" field, when it has one.
	Message string
}

func (e *ServerError) Error() string {
	if e.Message != "" {
		return "server error in stream: " + httpadapter.Message(e.Message) // its start: it may be large
	}
	return "server error in stream: " + httpadapter.Quote(e.Raw) // its start: the object may be large
}

// Result is a finished answer as the accumulator read it: its tool calls
// in turn order (Index is the position), the finish reason, and the usage
// object when the server sent one. The text is not kept: it is returned
// piece by piece by [Accumulator.Add].
type Result struct {
	ToolCalls []models.ToolCall
	// Truncated are the calls the length limit cut off, with the
	// arguments received so far (finish_reason "length" while their
	// arguments are empty or not yet whole JSON: the last call's, or
	// several when the server interleaves parallel calls); never
	// repaired into calls. Their Index follows the whole calls'. A call
	// cut before its name arrived is in neither list.
	Truncated []models.ToolCall
	Finish    string
	Usage     json.RawMessage
}

// Accumulator folds the chunks of one streamed Chat Completions answer
// into its tool calls. Tool-call fragments are keyed by their index and,
// when present, their id, never by arrival order, which covers the shapes
// real servers send: parallel calls at indices 0, 1, 2; every parallel call
// at index 0 with distinct ids; index 1 starting before index 0 is done; a
// whole call in one fragment; a first fragment without the function name.
// The index says which call a fragment belongs to; an id only tells calls
// at the same index apart, so fragments at different indices are never
// merged. Two calls with one id are an error: results are matched to calls
// by id, so one of them could never be answered.
// Arguments are only checked once the stream has finished properly, and a
// call that is cut or invalid is an error, never repaired.
//
// Only choice 0 is read. Its zero value is ready. It is not safe for
// concurrent use: one goroutine reads one stream.
type Accumulator struct {
	calls   []*callState           // in order of first appearance
	byIndex map[int64]*callState   // the latest call seen at each index
	byID    map[callRef]*callState // calls by index and id
	finish  string
	usage   json.RawMessage
	done    bool
	chunkID string
	err     error
}

// callRef names a call by its index and id.
type callRef struct {
	index int64
	id    string
}

type callState struct {
	index int64
	id    string
	name  string
	args  []byte
}

// Add folds one chunk in and returns the content it carried (content and
// refusal deltas of choice 0), to be streamed as text. It returns a
// *[ServerError] for an error object in the stream; the accumulator then
// refuses further chunks.
func (a *Accumulator) Add(chunk *sdk.ChatCompletionChunk) (string, error) {
	if a.err != nil {
		return "", a.err
	}
	if f, ok := chunk.JSON.ExtraFields["error"]; ok && f.Raw() != "" && f.Raw() != "null" {
		se := &ServerError{Raw: json.RawMessage(f.Raw())}
		var body struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(se.Raw, &body) == nil {
			se.Message = body.Message
		} else {
			_ = json.Unmarshal(se.Raw, &se.Message) // some servers send the message alone
		}
		a.err = se
		return "", se
	}
	if chunk.ID != "" && a.chunkID == "" {
		a.chunkID = chunk.ID
	}
	if chunk.JSON.Usage.Valid() {
		a.usage = json.RawMessage(chunk.Usage.RawJSON())
	}
	var text string
	for i := range chunk.Choices {
		choice := &chunk.Choices[i]
		if choice.Index != 0 {
			continue
		}
		text += choice.Delta.Content + choice.Delta.Refusal
		for j := range choice.Delta.ToolCalls {
			a.fragment(&choice.Delta.ToolCalls[j])
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
	return text, nil
}

// fragment folds one tool-call fragment in.
func (a *Accumulator) fragment(tc *sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	var c *callState
	ref := callRef{tc.Index, tc.ID}
	switch cur := a.byIndex[tc.Index]; {
	case tc.ID != "" && a.byID[ref] != nil:
		c = a.byID[ref] // a later fragment repeating its id
	case tc.ID != "" && cur != nil && cur.id == "":
		c = cur // the id arrives after a first fragment without one
		c.id = tc.ID
		a.byID[ref] = c
	case tc.ID != "" || cur == nil:
		c = &callState{index: tc.Index, id: tc.ID} // a new call, even at a used index
		a.calls = append(a.calls, c)
		if a.byIndex == nil {
			a.byIndex = make(map[int64]*callState)
			a.byID = make(map[callRef]*callState)
		}
		if tc.ID != "" {
			a.byID[ref] = c
		}
	default:
		c = cur
	}
	a.byIndex[tc.Index] = c
	if name := tc.Function.Name; name != "" && name != c.name {
		c.name += name // set once; servers that stream the name send pieces
	}
	c.args = append(c.args, tc.Function.Arguments...)
}

// Done records the stream's [DONE] event.
func (a *Accumulator) Done() { a.done = true }

// Result checks that the stream finished properly and returns the answer:
// ErrIncomplete when no finish reason arrived, ErrInvalidToolCall for a
// call without a name or with arguments that are not JSON (empty
// arguments mean {}), and the server error met by Add, if any. With
// finish "length", a call whose arguments are not whole JSON, or empty,
// was cut off: it is returned in Truncated, indexed after the whole calls,
// which keep their order; one without a name was cut before it arrived
// and is dropped, whatever its arguments (a follow-up could not name it). Calls without an id get
// "call_<completion id>_<n>" (or "call_<n>"), with a suffix if that is
// the id of another call. With finish "content_filter" the answer has no
// calls at all, whatever was received of them. A finish reason without
// [DONE] is accepted: every content chunk has arrived by then.
func (a *Accumulator) Result() (Result, error) {
	if a.err != nil {
		return Result{}, a.err
	}
	if a.finish == "" {
		if a.done {
			return Result{}, fmt.Errorf("%w (got [DONE])", ErrIncomplete)
		}
		return Result{}, fmt.Errorf("%w (cut off before [DONE])", ErrIncomplete)
	}
	if a.finish == "content_filter" {
		// The filter stopped the answer where it stood, in the middle of
		// a call as well: none of its calls is emitted, as the Anthropic
		// adapter emits none of a refusal's.
		return Result{Finish: a.finish, Usage: a.usage}, nil
	}
	ordered := slices.Clone(a.calls)
	slices.SortStableFunc(ordered, func(x, y *callState) int { return cmp.Compare(x.index, y.index) })
	res := Result{Finish: a.finish, Usage: a.usage}
	n := len(ordered)
	seen := make(map[string]int, n) // the ids the server sent, to their call
	for i, c := range ordered {
		if at, dup := seen[c.id]; dup && c.id != "" {
			return Result{}, fmt.Errorf("%w: calls %d (%s, index %d) and %d (%s, index %d) share the id %q",
				ErrInvalidToolCall, at, ordered[at].name, ordered[at].index, i, c.name, c.index, c.id)
		}
		if c.id != "" {
			seen[c.id] = i
		}
	}
	var cut []*callState
	for i, c := range ordered {
		whole := json.Valid(c.args)
		if a.finish == "length" && (!whole || c.name == "") {
			// Cut off by the length limit: arguments not yet whole JSON
			// (servers that interleave parallel calls may be in the middle
			// of several), or none at all: a server that interleaves may
			// be cut between a call's first fragment and its arguments,
			// and nothing tells that call from a whole one without
			// parameters, so it is not run with {} in their place. A call
			// without a name was cut before it (some servers send it
			// after the arguments), whatever its arguments.
			if c.name != "" {
				cut = append(cut, c)
			} // else cut before its name: nothing can name it to the model
			continue
		}
		if c.name == "" {
			return Result{}, fmt.Errorf("%w: call %d (id %q) has no function name", ErrInvalidToolCall, i, c.id)
		}
		args := c.args
		if len(args) == 0 {
			args = []byte("{}")
		} else if !whole {
			return Result{}, fmt.Errorf("%w: call %d (%s) has arguments that are not JSON: %q", ErrInvalidToolCall, i, c.name, args)
		}
		res.ToolCalls = append(res.ToolCalls, models.ToolCall{Index: len(res.ToolCalls), ID: c.id, Name: c.name, Arguments: args})
	}
	// The cut calls come after the whole ones (see models.MetaTruncatedCall).
	for _, c := range cut {
		res.Truncated = append(res.Truncated, models.ToolCall{Index: len(res.ToolCalls) + len(res.Truncated), ID: c.id, Name: c.name, Arguments: c.args})
	}
	// Made-up ids last, once every real one is known: none may repeat one.
	for _, calls := range [][]models.ToolCall{res.ToolCalls, res.Truncated} {
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = a.madeID(calls[i].Index, seen)
			}
		}
	}
	return res, nil
}

// madeID is an id for the i-th call, which the server sent without one:
// "call_<completion id>_<i>" (or "call_<i>"), with a further "_<k>" when
// that is taken. taken holds every id of the answer so far; madeID adds
// the one it returns.
func (a *Accumulator) madeID(i int, taken map[string]int) string {
	base := "call_" + strconv.Itoa(i)
	if a.chunkID != "" {
		base = "call_" + a.chunkID + "_" + strconv.Itoa(i)
	}
	id := base
	for k := 1; ; k++ {
		if _, dup := taken[id]; !dup {
			break
		}
		id = base + "_" + strconv.Itoa(k)
	}
	taken[id] = i
	return id
}
