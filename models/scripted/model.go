package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
)

// Options configure a [Model]. A nil *Options or a zero field means the
// default.
type Options struct {
	// MaxRecorded bounds how many requests [Model.Requests] keeps (the
	// most recent ones); default 1024. Negative keeps none.
	MaxRecorded int
}

// Record is a request the model received and the turn that answered it
// (-1 when none did: the script was exhausted).
type Record struct {
	Request *models.Request
	Turn    int
}

// Model is a scripted model: it answers the requests of the adapters made
// by [Model.Spec] with the turns of its script, and records them. Its
// methods are safe for concurrent use: one Model may back many adapters,
// sessions and restarts. Create it with [New]; the zero Model is not
// usable.
type Model struct {
	turns       []compiledTurn
	selection   Selection
	repeat      bool
	maxRecorded int

	mu       sync.Mutex
	next     int // next turn of a BySequence script
	recorded []Record
	head     int // oldest record once recorded is full
	served   int
}

// New checks script and compiles it into a Model. It returns an error
// naming the turn and call at fault: a script without turns, an unknown
// selection, negative counts or durations, a call without id or name,
// duplicate call ids in a turn, arguments that are not JSON (without Raw),
// or chunks that do not add up to the arguments.
func New(script Script, opts *Options) (*Model, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxRecorded == 0:
		o.MaxRecorded = 1024
	case o.MaxRecorded < 0:
		o.MaxRecorded = 0
	}
	sel := script.Select
	switch sel {
	case "":
		sel = BySequence
	case BySequence, ByConversation:
	default:
		return nil, fmt.Errorf("scripted: unknown selection %q", sel)
	}
	if len(script.Turns) == 0 {
		return nil, errors.New("scripted: script has no turns")
	}
	m := &Model{selection: sel, repeat: script.Repeat, maxRecorded: o.MaxRecorded}
	for i, t := range script.Turns {
		ct, err := compile(t)
		if err != nil {
			return nil, fmt.Errorf("scripted: turn %d: %w", i, err)
		}
		m.turns = append(m.turns, ct)
	}
	return m, nil
}

// Fork returns a new Model playing m's script with its own selection state
// and records (as a Model made by [New] from the same script and options
// starts: at the first turn, nothing recorded). The compiled turns are
// shared, never copied: they are not changed once compiled, so many
// Models forked from one (one per session of a host running the same
// script on many sessions) hold one copy of the script between them.
func (m *Model) Fork() *Model {
	return &Model{turns: m.turns, selection: m.selection, repeat: m.repeat, maxRecorded: m.maxRecorded}
}

// MustNew is New for scripts known to be valid (literals in tests and
// examples); it panics on error.
func MustNew(script Script, opts *Options) *Model {
	m, err := New(script, opts)
	if err != nil {
		panic(err)
	}
	return m
}

// Spec returns the spec of an adapter duplex answering from this model.
// Each incarnation starts with no open request; the turn selection state
// lives in the Model, so a restarted BySequence adapter goes on with the
// next turn.
func (m *Model) Spec(name string) actors.Spec {
	return actors.Spec{Name: name, New: func() actors.Logic { return &logic{model: m} }}
}

// Requests returns the requests received so far (at most MaxRecorded, the
// most recent), oldest first.
func (m *Model) Requests() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Record, 0, len(m.recorded))
	out = append(out, m.recorded[m.head:]...)
	return append(out, m.recorded[:m.head]...)
}

// Served returns how many requests the model has answered or is answering.
func (m *Model) Served() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served
}

// pick chooses the turn for req and records it.
func (m *Model) pick(req *models.Request) (*compiledTurn, int, error) {
	var idx int
	var pickErr error
	if m.selection == ByConversation {
		idx, pickErr = assistantMessages(req)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.selection == BySequence {
		idx = m.next
		m.next++
	}
	m.served++
	if pickErr == nil && m.repeat {
		idx %= len(m.turns)
	}
	if pickErr == nil && idx >= len(m.turns) {
		pickErr = fmt.Errorf("script exhausted: no turn %d (the script has %d)", idx, len(m.turns))
	}
	rec := Record{Request: req, Turn: idx}
	if pickErr != nil {
		rec.Turn = -1
	}
	m.record(rec)
	if pickErr != nil {
		return nil, -1, pickErr
	}
	return &m.turns[idx], idx, nil
}

func (m *Model) record(r Record) {
	switch {
	case m.maxRecorded == 0:
	case len(m.recorded) < m.maxRecorded:
		m.recorded = append(m.recorded, r)
	default:
		m.recorded[m.head] = r
		m.head = (m.head + 1) % m.maxRecorded
	}
}

// assistantMessages counts the assistant messages of req's "messages".
func assistantMessages(req *models.Request) (int, error) {
	raw, ok := req.Param(models.ParamMessages)
	if !ok {
		return 0, nil
	}
	msgs, err := models.DecodeMessages(raw)
	if err != nil {
		return 0, fmt.Errorf("read messages: %w", err)
	}
	n := 0
	for _, msg := range msgs {
		if msg.Role == models.RoleAssistant {
			n++
		}
	}
	return n, nil
}

// step is one compiled frame of a turn, waited for by wait first.
type step struct {
	wait    time.Duration
	typ     messages.FrameType
	callID  string
	name    string
	text    string
	payload []byte
	// meta is the frame's metadata (nil when it has none), made once at
	// compile time and shared by every frame of the step: frames and their
	// metadata are immutable once sent.
	meta *messages.Metadata
}

// fill makes f the frame of s on streamID.
func (s *step) fill(f *messages.Frame, streamID string) *messages.Frame {
	f.Type, f.StreamId, f.ToolCallId, f.Name, f.Text, f.Payload, f.Meta = s.typ, streamID, s.callID, s.name, s.text, s.payload, s.meta
	return f
}

// makes reports whether f is the frame s makes (on f's stream).
func (s *step) makes(f *messages.Frame) bool {
	return f.Type == s.typ && f.ToolCallId == s.callID && f.Name == s.name && f.Text == s.text &&
		f.Meta == s.meta && bytes.Equal(f.Payload, s.payload)
}

// compiledTurn is a turn ready to play: its steps, then its ending.
type compiledTurn struct {
	steps []step
	// endWait is waited for before the ending (the turn's Delay when it
	// has no frames, its Pace otherwise).
	endWait time.Duration
	stall   bool
	// instant says the turn has no waits and does not stall: it is
	// played whole within one actor step.
	instant bool
	// calls says the turn makes tool calls: a follow-up on its stream
	// comes next.
	calls bool
	// ending are the frames that end the turn, after endWait: META
	// thinking_blocks (when set), META usage (when set), META finish and
	// END; or ERROR and END when the turn fails. Their stream id is the
	// request's.
	ending []step
}

// frames is the number of frames the turn emits when played to its end.
func (t *compiledTurn) frames() int { return len(t.steps) + len(t.ending) }

func compile(t Turn) (compiledTurn, error) {
	if t.Deltas < 0 || t.Delay < 0 || t.Pace < 0 {
		return compiledTurn{}, errors.New("negative deltas, delay or pace")
	}
	var steps []step
	add := func(s step) {
		if len(steps) == 0 {
			s.wait = t.Delay
		} else {
			s.wait = t.Pace
		}
		steps = append(steps, s)
	}
	if t.Text != "" {
		for _, piece := range Split(t.Text, t.Deltas) {
			add(step{typ: messages.FrameType_TEXT, text: piece})
		}
	}
	var streamed [][]step // argument chunks (and completion) of streaming calls
	seen := make(map[string]bool, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		if c.ID == "" || c.Name == "" {
			return compiledTurn{}, fmt.Errorf("call %d: no id or name", i)
		}
		if seen[c.ID] {
			return compiledTurn{}, fmt.Errorf("call %d: duplicate id %q", i, c.ID)
		}
		seen[c.ID] = true
		if c.Split < 0 {
			return compiledTurn{}, fmt.Errorf("call %q: negative split", c.ID)
		}
		args := c.Arguments
		chunks := c.Chunks
		if len(chunks) > 0 {
			joined := ""
			for _, ch := range chunks {
				joined += ch
			}
			if args == "" {
				args = joined
			} else if args != joined {
				return compiledTurn{}, fmt.Errorf("call %q: chunks do not add up to the arguments", c.ID)
			}
		}
		if !c.Raw {
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return compiledTurn{}, fmt.Errorf("call %q: arguments are not valid JSON (set Raw to send them anyway)", c.ID)
			}
		}
		if len(chunks) == 0 && c.Split > 1 {
			chunks = Split(args, c.Split)
		}
		call := step{typ: messages.FrameType_TOOL_CALL, callID: c.ID, name: c.Name, meta: &messages.Metadata{Index: uint32(i)}}
		if len(chunks) == 0 {
			call.payload = []byte(args)
			add(call)
			continue
		}
		call.meta.Streaming = true
		add(call)
		var rest []step
		chunk := &messages.Metadata{ToolArgStream: true} // one for all the chunks of the call
		for _, ch := range chunks {
			rest = append(rest, step{typ: messages.FrameType_TEXT, callID: c.ID, text: ch, meta: chunk})
		}
		rest = append(rest, step{typ: messages.FrameType_META, callID: c.ID, meta: &messages.Metadata{ToolComplete: true}})
		if !t.Interleave {
			for _, s := range rest {
				add(s)
			}
			continue
		}
		streamed = append(streamed, rest)
	}
	// Interleaved: every streaming call is open; now one piece of each in turn.
	for more := true; more; {
		more = false
		for i := range streamed {
			if len(streamed[i]) > 0 {
				add(streamed[i][0])
				streamed[i] = streamed[i][1:]
				more = true
			}
		}
	}
	ct := compiledTurn{steps: steps, endWait: t.Pace, stall: t.Stall, calls: len(t.ToolCalls) > 0}
	if len(steps) == 0 {
		ct.endWait = t.Delay
	}
	ct.instant = !ct.stall && ct.endWait == 0
	for _, s := range steps {
		ct.instant = ct.instant && s.wait == 0
	}
	if len(t.Thinking) > 0 && !json.Valid(t.Thinking) {
		return compiledTurn{}, errors.New("thinking is not valid JSON")
	}
	if t.Error != "" {
		ct.ending = []step{{typ: messages.FrameType_ERROR, text: t.Error}, {typ: messages.FrameType_END}}
		return ct, nil
	}
	if len(t.Thinking) > 0 {
		ct.ending = append(ct.ending, step{typ: messages.FrameType_META, name: models.MetaThinkingBlocks, payload: t.Thinking})
	}
	if t.Usage != nil {
		usage, _ := json.Marshal(t.Usage) // a struct of ints always encodes
		ct.ending = append(ct.ending, step{typ: messages.FrameType_META, name: models.MetaUsage, payload: usage})
	}
	finish := t.Finish
	if finish == "" {
		finish = "stop"
		if len(t.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	encoded, _ := json.Marshal(finish) // a string always encodes
	ct.ending = append(ct.ending, step{typ: messages.FrameType_META, name: models.MetaFinish, payload: encoded},
		step{typ: messages.FrameType_END})
	return ct, nil
}
