package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// Spec returns the spec of the tool's duplex actor, named "tool-<name>".
// Each incarnation starts with no calls in flight.
func (t *Tool) Spec() actors.Spec {
	return actors.Spec{Name: "tool-" + t.def.Name, New: t.Logic}
}

// Logic returns a new Logic for the tool's duplex (what [Tool.Spec] runs),
// for driving it step by step with actorstest.Recorder.
//
// The duplex answers DESCRIBE with a DESCRIPTION frame (payload: the
// [Description] as JSON) and END, both with the DESCRIBE's tool-call id
// when it has one (so a DESCRIBE on the stream of a running call ends
// only itself, in the runtime's view too: see package actors); one with
// the id of a call running on its stream is, for the runtime, a frame of
// that call, and gets its DESCRIPTION alone, the call's END, after its
// answer, ending both. An END of
// no id ends its stream and every call on it, so a DESCRIBE of no id on
// the stream of running calls gets its DESCRIPTION at once and its END
// after the last of those calls' ENDs (each DESCRIBE its own END, as on a
// stream with no call running). It ignores TICK and calls for
// other tools. A TOOL_CALL for its name is answered with exactly one TOOL_RESULT
// followed by an END, both carrying the call's stream id and tool-call id:
// the handler's result, or an error result (see [FailureKind]) for invalid
// arguments, a handler error, a timeout, a CANCEL (of that call id, or of
// the whole stream when the CANCEL has no call id) or ABORT (of the
// stream), and a panic. A panic in a handler fails the actor: the call gets
// a "panicked" result, every other call in flight a "stopped" result, and
// the supervisor restarts the tool. A panic while a call's arguments are
// validated, before anything of the call is kept, is that call's
// "panicked" result alone and the actor goes on serving, as a dispatcher
// that runs the call inline does. A second TOOL_CALL with the id of a
// call still running is ignored.
func (t *Tool) Logic() actors.Logic {
	return &toolLogic{t: t, running: map[callKey]*runningCall{}, bySeq: map[uint64]callKey{}}
}

// callKey identifies a call: ids are unique within a stream.
type callKey struct{ stream, id string }

func keyOf(f *messages.Frame) callKey { return callKey{f.GetStreamId(), f.GetToolCallId()} }

type runningCall struct {
	seq      uint64
	call     *messages.Frame
	cancel   func()
	deadline time.Time // of an async call with a timeout
}

// Keys of the tool logic's background work and timer.
type (
	jobKey uint64
	// deadlineKey is the key of the timer armed for the earliest deadline
	// of the async calls running (at).
	deadlineKey struct{ at time.Time }
)

// outcome is what a handler run produced, encoded off the actor goroutine.
type outcome struct {
	payload json.RawMessage
	err     error
}

type toolLogic struct {
	t       *Tool
	seq     uint64
	running map[callKey]*runningCall
	bySeq   map[uint64]callKey
	inTurn  *runningCall // the sync call running in this turn, if any
	// held counts, per stream, the DESCRIBEs of no id whose ENDs wait
	// until no call runs there (see describe): each gets its own.
	held map[string]int
	// armed is the deadline the one timeout timer is set for; zero when
	// none is. Every call has the tool's timeout, so a call started later
	// has a later deadline: it needs no timer of its own while one is
	// armed, and a call that ends leaves the timer be (a timer per call
	// cost a third of the allocations of an async call, and the runtime
	// timer heap's locks).
	armed time.Time
}

// HandlerPanicError is the failure of a tool actor whose handler panicked.
type HandlerPanicError struct {
	Tool       string
	ToolCallID string
	Err        error // the *actors.PanicError
}

func (e *HandlerPanicError) Error() string {
	return fmt.Sprintf("tool %q panicked in call %s: %v", e.Tool, e.ToolCallID, e.Err)
}

func (e *HandlerPanicError) Unwrap() error { return e.Err }

func (l *toolLogic) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Frame:
		switch m.GetType() {
		case messages.FrameType_DESCRIBE:
			l.describe(c, m)
		case messages.FrameType_TOOL_CALL:
			if m.GetName() == l.t.def.Name {
				l.call(c, m)
			}
		case messages.FrameType_CANCEL:
			l.cancel(c, m.GetStreamId(), m.GetToolCallId(), cancelledText(false))
		case messages.FrameType_ABORT:
			l.cancel(c, m.GetStreamId(), "", cancelledText(true))
		}
	case actors.AsyncDone:
		if k, ok := m.Key.(jobKey); ok {
			l.done(c, uint64(k), m)
		}
	case actors.Timer:
		if k, ok := m.Key.(deadlineKey); ok && k.at.Equal(l.armed) {
			l.deadline(c, k.at)
		}
	}
}

// describe answers a DESCRIBE with its DESCRIPTION and END, both with
// the DESCRIBE's tool-call id, if it has one: the runtime, which tracks a
// stream's calls by their ids, then ends the DESCRIBE alone, not a call
// running on its stream. An END of no id ends the stream and every call
// on it, so that of a DESCRIBE of no id on a stream with calls running
// waits for the last of them to end (see finish). Each DESCRIBE gets its
// END, as on a stream with no call running: several DESCRIBEs of no id
// on a busy stream get as many ENDs, one after the other, once it is
// free. A DESCRIBE with the id of a call running on its stream is, for
// the runtime, a frame of that call (it tells a stream's calls by their
// ids, and a call's id is unique on its stream while it runs): it gets
// its DESCRIPTION alone, and the call's END, after the call's answer,
// ends both. An END of that id at once would end the call for the
// runtime before its answer, which a Resume, a restart or a stop would
// then neither give nor stop the work of, and the call's own END would
// come a second time.
func (l *toolLogic) describe(c actors.Context, m *messages.Frame) {
	stream, id := m.GetStreamId(), m.GetToolCallId()
	c.Emit(&messages.Frame{Type: messages.FrameType_DESCRIPTION, StreamId: stream, ToolCallId: id,
		Name: l.t.def.Name, Payload: l.t.describe})
	if id != "" {
		if _, running := l.running[callKey{stream, id}]; running {
			return
		}
	}
	if id == "" && l.runsOn(stream) {
		if l.held == nil {
			l.held = map[string]int{}
		}
		l.held[stream]++
		return
	}
	c.Emit(&messages.Frame{Type: messages.FrameType_END, StreamId: stream, ToolCallId: id})
}

// runsOn reports whether a call runs on stream.
func (l *toolLogic) runsOn(stream string) bool {
	for k := range l.running {
		if k.stream == stream {
			return true
		}
	}
	return false
}

func (l *toolLogic) lookup(seq uint64) *runningCall {
	k, ok := l.bySeq[seq]
	if !ok {
		return nil
	}
	return l.running[k]
}

func (l *toolLogic) call(c actors.Context, call *messages.Frame) {
	key := keyOf(call)
	if _, dup := l.running[key]; dup {
		c.Logger().Warn("duplicate tool call ignored", "tool", l.t.def.Name, "tool_call_id", key.id)
		return
	}
	// Nothing is registered yet: a panic while validating is this call's
	// answer alone, and the actor goes on serving (see check).
	args, err := l.t.validator.check(call.GetPayload())
	if err != nil {
		l.t.refuse(c, call, err)
		return
	}
	l.seq++
	rc := &runningCall{seq: l.seq, call: call}
	l.running[key], l.bySeq[rc.seq] = rc, key
	if l.t.def.Sync {
		l.runSync(c, rc, args)
		return
	}
	t := l.t
	rc.cancel = c.Go(jobKey(rc.seq), func(ctx context.Context, _ func(any)) any { return t.run(ctx, call, args) })
	if t.def.Timeout > 0 {
		rc.deadline = time.Now().Add(t.def.Timeout)
		if l.armed.IsZero() {
			l.armed = rc.deadline
			c.After(t.def.Timeout, deadlineKey{rc.deadline})
		}
	}
}

// deadline answers the calls whose deadline is at or before at, the
// deadline the timer that fired was set for, with their timeout, in call
// order, and sets the timer for the earliest deadline left.
func (l *toolLogic) deadline(c actors.Context, at time.Time) {
	l.armed = time.Time{}
	for _, rc := range l.inOrder(func(callKey) bool { return true }) {
		switch {
		case rc.deadline.IsZero():
		case !rc.deadline.After(at):
			l.finish(c, rc, errorResult(rc.call, FailureTimeout, fmt.Sprintf("Tool %s timed out after %dms",
				l.t.def.Name, l.t.def.Timeout.Milliseconds())))
		case l.armed.IsZero(): // the oldest call left has the earliest deadline
			l.armed = rc.deadline
			c.After(max(time.Until(rc.deadline), 0), deadlineKey{rc.deadline})
		}
	}
}

// runSync runs the handler in this turn. A panic unwinds Receive: the
// shell fails the actor and OnFailure answers the call.
func (l *toolLogic) runSync(c actors.Context, rc *runningCall, args json.RawMessage) {
	ctx := newSyncContext(rc.call, l.t.def.Timeout)
	rc.cancel = func() { ctx.end() }
	l.inTurn = rc
	out := l.t.run(ctx, rc.call, args)
	l.inTurn = nil
	if ctx.end() {
		l.finish(c, rc, errorResult(rc.call, FailureTimeout, fmt.Sprintf("Tool %s timed out after %dms",
			l.t.def.Name, l.t.def.Timeout.Milliseconds())))
		return
	}
	l.finish(c, rc, l.t.resultFrame(rc.call, out))
}

// run calls the handler and encodes its result. It may run on any
// goroutine and touches no logic state.
func (t *Tool) run(ctx context.Context, call *messages.Frame, args json.RawMessage) outcome {
	if _, ok := ctx.(*syncContext); !ok { // it carries the call already
		ctx = withCall(ctx, call)
	}
	v, err := t.def.Handler(ctx, args)
	if err != nil {
		return outcome{err: err}
	}
	switch r := v.(type) {
	case nil:
		return outcome{payload: json.RawMessage("{}")}
	case json.RawMessage:
		if !json.Valid(r) {
			return outcome{err: errors.New("handler returned invalid JSON")}
		}
		return outcome{payload: r}
	}
	if t.encode != nil {
		if payload, ok := t.encode(v); ok {
			return outcome{payload: payload}
		}
	}
	payload, err := encodeResult(v)
	if err != nil {
		return outcome{err: fmt.Errorf("encode result: %w", err)}
	}
	return outcome{payload: payload}
}

// resultEncoder is a buffer with its encoder, reused by encodeResult.
type resultEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var resultEncoders = sync.Pool{New: func() any {
	e := &resultEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false) // "<", ">" and "&" reach the model as themselves
	return e
}}

// encodeResult encodes a handler's result as JSON: one allocation, the
// payload, when the result is small.
func encodeResult(v any) (json.RawMessage, error) {
	e := resultEncoders.Get().(*resultEncoder)
	defer func() {
		if e.buf.Cap() <= 64<<10 { // a huge result's buffer is not kept
			e.buf.Reset()
			resultEncoders.Put(e)
		}
	}()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))), nil
}

// refuse answers a call whose arguments check refused: invalid arguments,
// or a panicked result when validating them panicked (as a panic in the
// handler is answered), then logged on c with its stack.
func (t *Tool) refuse(c actors.Context, call *messages.Frame, err error) {
	var p *validationPanic
	if !errors.As(err, &p) {
		answer(c, errorResult(call, FailureInvalidArguments, err.Error()))
		return
	}
	answer(c, t.panicked(call, p.value))
	logPanic(c.Logger(), call, "validation", p.value, p.stack)
}

// logPanic logs at Error level a panic that became call's answer rather
// than a failure of the actor (which the runtime reports): the result
// tells the caller what panicked, the log tells where, by the stack the
// panic was raised on. during is what of the call panicked: "validation"
// or "handler". It is called once the answer is made, and a panic of the
// logger's handler is recovered and dropped: a faulty log loses the
// record, never the call's answer nor the answering actor.
func logPanic(l *slog.Logger, call *messages.Frame, during string, value any, stack []byte) {
	defer func() { _ = recover() }()
	l.Error("tool call panicked", slog.String("tool", call.GetName()), slog.String("tool_call_id", call.GetToolCallId()),
		slog.String("stream_id", call.GetStreamId()), slog.String("during", during), slog.Any("panic", value),
		slog.String("stack", string(stack)))
}

// panicked is the answer to a call whose handler, or validation, panicked
// with value.
func (t *Tool) panicked(call *messages.Frame, value any) *messages.Frame {
	return errorResult(call, FailurePanic, fmt.Sprintf("Tool %s panicked: %v", t.def.Name, value))
}

func (t *Tool) resultFrame(call *messages.Frame, out outcome) *messages.Frame {
	if out.err != nil {
		var re *ResultError
		if errors.As(out.err, &re) {
			if f, ok := re.frame(call); ok {
				return f
			}
		}
		if ae := (*ArgumentsError)(nil); errors.As(out.err, &ae) {
			return errorResult(call, FailureInvalidArguments, out.err.Error())
		}
		return errorResult(call, FailureHandler, out.err.Error())
	}
	return messages.RawToolResult(call.GetStreamId(), call.GetToolCallId(), call.GetName(), out.payload)
}

func (l *toolLogic) done(c actors.Context, seq uint64, d actors.AsyncDone) {
	rc := l.lookup(seq)
	if rc == nil {
		return // answered already (timeout, cancel): a late result is discarded
	}
	if d.Err != nil {
		var pe *actors.PanicError
		if !errors.As(d.Err, &pe) {
			l.finish(c, rc, errorResult(rc.call, FailureStopped, fmt.Sprintf("Tool %s stopped: %v", l.t.def.Name, d.Err)))
			return
		}
		l.finish(c, rc, l.t.panicked(rc.call, pe.Value))
		c.Fail(&HandlerPanicError{Tool: l.t.def.Name, ToolCallID: rc.call.GetToolCallId(), Err: d.Err})
		return
	}
	out, _ := d.Value.(outcome)
	l.finish(c, rc, l.t.resultFrame(rc.call, out))
}

func (l *toolLogic) finish(c actors.Context, rc *runningCall, result *messages.Frame) {
	delete(l.running, keyOf(rc.call))
	delete(l.bySeq, rc.seq)
	if rc.cancel != nil {
		rc.cancel()
	}
	answer(c, result)
	if stream := result.GetStreamId(); l.held[stream] > 0 && !l.runsOn(stream) {
		n := l.held[stream]
		delete(l.held, stream)
		for range n {
			c.Emit(&messages.Frame{Type: messages.FrameType_END, StreamId: stream})
		}
	}
}

// answer emits a call's one result and the END that closes it.
func answer(c actors.Context, result *messages.Frame) {
	c.Emit(result)
	c.Emit(&messages.Frame{Type: messages.FrameType_END, StreamId: result.GetStreamId(), ToolCallId: result.GetToolCallId()})
}

// inOrder returns the running calls that match, oldest first.
func (l *toolLogic) inOrder(match func(callKey) bool) []*runningCall {
	var out []*runningCall
	for k, rc := range l.running {
		if match(k) {
			out = append(out, rc)
		}
	}
	slices.SortFunc(out, func(a, b *runningCall) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

func (l *toolLogic) cancel(c actors.Context, stream, id, why string) {
	for _, rc := range l.inOrder(func(k callKey) bool { return k.stream == stream && (id == "" || k.id == id) }) {
		l.finish(c, rc, errorResult(rc.call, FailureCancelled, why))
	}
}

// OnFailure implements actors.FailureHandler: every call still running
// gets its error result before the incarnation ends.
func (l *toolLogic) OnFailure(c actors.Context, err error) {
	if rc := l.inTurn; rc != nil {
		l.inTurn = nil
		var pe *actors.PanicError
		if errors.As(err, &pe) {
			l.finish(c, rc, l.t.panicked(rc.call, pe.Value))
		}
	}
	for _, rc := range l.inOrder(func(callKey) bool { return true }) {
		l.finish(c, rc, errorResult(rc.call, FailureStopped, fmt.Sprintf("Tool %s stopped: %v", l.t.def.Name, err)))
	}
}
