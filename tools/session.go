package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
)

// FailureInterrupted is the failure kind of the result a resumed session
// gives a call that was interrupted (mid-stream or mid-execution) when the
// session stopped, and that is not run again.
const FailureInterrupted FailureKind = "interrupted"

// MetaSession is the name of the META frame a loop emits when it resumes
// a session.
const MetaSession = "session"

// SessionOptions make a tool loop's conversation resumable: the session
// state is persisted at each step, and a loop started later with the same
// ID and store (after a crash, a restart, or in a new process) continues
// it. Options are copied.
//
// # What is persisted
//
// At each step, before acting on it, the loop writes a messages.LoopSession
// snapshot under ID: the request that started the session, its PARAMs,
// the messages so far (system prompt included), the number of tool rounds
// done, and the current model response (its text so far and its tool calls
// by id: complete or still streaming, with their results once they have
// them). The steps are: the request is sent to the model; a tool call
// appears in the response (streaming or complete); the response ends (the
// calls start); a call's result arrives; a round ends (the follow-up is
// sent); the final answer is given.
//
// # Starting and resuming
//
// A loop with a Session runs one conversation at a time: the first
// request it receives starts the session (a request on another stream
// while it is running ends that stream with ERROR and END). To resume, the
// caller starts a loop with the same ID and store and sends the same first
// request again (the same "messages" payload, byte for byte; a different
// one is refused with ERROR and END: use a new ID for a new
// conversation). The loop then ignores the request's PARAMs and continues
// from the stored state, on the caller's stream:
//
//   - a request the model was answering with no tool call seen yet is
//     sent again;
//   - otherwise the calls of the interrupted response are emitted as
//     TOOL_CALL frames and answered: a call that completed keeps its
//     stored result and is NEVER run again; a call that was still
//     streaming or running gets an error result of kind
//     [FailureInterrupted], unless its tool is Idempotent and its
//     arguments were complete, in which case it runs (again); then the
//     follow-up request goes to the model and the loop carries on to a
//     final answer. A META frame named [MetaSession] says what was
//     reused, run again and interrupted, by tool-call id;
//   - a session that had already ended answers with its final text and
//     END, without asking the model.
//
// A loop restarted by its supervisor reloads the session from the store;
// the stream open at the failure was closed with ERROR and END, and the
// caller resumes by sending the first request again. A loop that stayed up
// while the stream failed (the model answered ERROR) resumes the same way,
// from the step it last persisted.
//
// # Failures
//
// A store failure fails the loop actor with the *durability.StoreError
// (errors.As): calls already surfaced get error results and the stream
// ends with ERROR and END.
type SessionOptions struct {
	// ID names the session in the store (it is the store's actor name);
	// required.
	ID string
	// Store keeps the session; required. The caller owns and closes it.
	Store durability.Store
	// Timeout bounds each store call; zero means none.
	Timeout time.Duration
}

func (o *SessionOptions) validate() error {
	switch {
	case o.ID == "":
		return errors.New("session: empty id")
	case o.Store == nil:
		return errors.New("session: nil store")
	case o.Timeout < 0:
		return fmt.Errorf("session: negative timeout %v", o.Timeout)
	}
	return nil
}

// sessionState is the durable side of a loop with a Session, for one
// incarnation of the loop actor.
type sessionState struct {
	opts       SessionOptions
	idempotent map[string]bool
	// diesWithProcess names the tools whose running calls certainly
	// stopped when the process did (Definition.DiesWithProcess).
	diesWithProcess map[string]bool
	// stored is the session as last written to or read from the store
	// (a marshaled messages.LoopSession), nil when there is none. A
	// resume starts from it, so a loop that outlives a failed stream
	// resumes exactly as a fresh loop reading the store would.
	stored []byte
	active string // the stream running the session
	steps  uint64
}

// sessionEvent is the payload of the META session frame.
type sessionEvent struct {
	Event       string   `json:"event"`
	SessionID   string   `json:"session_id"`
	Iteration   int      `json:"iteration"`
	Reused      []string `json:"reused,omitempty"`
	Rerun       []string `json:"rerun,omitempty"`
	Interrupted []string `json:"interrupted,omitempty"`
}

func (ss *sessionState) context() (context.Context, context.CancelFunc) {
	if ss.opts.Timeout > 0 {
		return context.WithTimeout(context.Background(), ss.opts.Timeout)
	}
	return context.Background(), func() {}
}

// load reads the stored session, at the start of an incarnation.
func (ss *sessionState) load(c actors.Context) {
	ctx, cancel := ss.context()
	defer cancel()
	snap, ok, err := ss.opts.Store.GetSnapshot(ctx, ss.opts.ID)
	if err != nil {
		c.Fail(fmt.Errorf("load session %q: %w", ss.opts.ID, err))
	}
	if !ok {
		return
	}
	ss.stored = snap.Data
	ss.steps = ss.decode(c, "load").GetSteps()
}

// decode returns the stored session; undecodable data fails the actor
// with a *durability.StoreError.
func (ss *sessionState) decode(c actors.Context, op string) *messages.LoopSession {
	var st messages.LoopSession
	if err := proto.Unmarshal(ss.stored, &st); err != nil {
		c.Fail(fmt.Errorf("%s session %q: %w", op, ss.opts.ID,
			&durability.StoreError{Op: durability.OpDecode, Name: ss.opts.ID, Err: err}))
	}
	return &st
}

// persist writes the state of s at a step, before the loop acts on it.
func (ss *sessionState) persist(c actors.Context, l *loopLogic, s *loopSession, phase messages.LoopPhase) {
	if s.stream != ss.active {
		return
	}
	ss.steps++
	st := &messages.LoopSession{SessionId: ss.opts.ID, FirstRequest: s.first, Params: s.params,
		Iteration: uint32(s.iteration), Phase: phase, Text: s.text.String(), Steps: ss.steps}
	st.Messages = make([][]byte, len(s.messages))
	for i, m := range s.messages {
		st.Messages[i] = m
	}
	for _, tc := range s.calls {
		st.Calls = append(st.Calls, &messages.LoopCall{Call: tc.call, Complete: true, Result: tc.result})
	}
	if phase == messages.LoopPhase_LOOP_PHASE_MODEL {
		for _, pc := range l.asm.Pending.Snapshot() {
			if pc.StreamID == s.stream {
				st.Calls = append(st.Calls, &messages.LoopCall{Call: pc.frame()})
			}
		}
	}
	data, err := proto.Marshal(st)
	if err != nil {
		c.Fail(fmt.Errorf("persist session %q: %w", ss.opts.ID, err))
	}
	ctx, cancel := ss.context()
	defer cancel()
	if err := ss.opts.Store.PersistSnapshot(ctx, ss.opts.ID, ss.steps, data); err != nil {
		c.Fail(fmt.Errorf("persist session %q: %w", ss.opts.ID, err))
	}
	ss.stored = data // nothing writes to data after this
	if phase == messages.LoopPhase_LOOP_PHASE_DONE {
		ss.active = ""
	}
}

// admit decides what the first request of stream s starts, given its
// "messages" payload: a new session (true), or nothing for now (false):
// the request is held back (a resume, run at its END) or refused.
func (ss *sessionState) admit(c actors.WrapperContext, l *loopLogic, s *loopSession, payload []byte) bool {
	if ss.active != "" && ss.active != s.stream {
		s.hold = true
		l.fail(c, s, fmt.Sprintf("tool loop: session %q is busy on another stream", ss.opts.ID))
		return false
	}
	if ss.stored == nil {
		ss.active = s.stream
		s.first = bytes.Clone(payload)
		return true
	}
	s.hold = true
	st := ss.decode(c, "resume")
	if !bytes.Equal(st.GetFirstRequest(), payload) {
		l.fail(c, s, fmt.Sprintf("tool loop: session %q was started with a different request; use a new session id for a new conversation", ss.opts.ID))
		return false
	}
	ss.active = s.stream
	s.resume = st
	return false
}

// restamp returns f on stream (a copy when it was on another).
func restamp(f *messages.Frame, stream string) *messages.Frame {
	if f == nil || f.GetStreamId() == stream {
		return f
	}
	cp := messages.CloneFrame(f)
	cp.StreamId = stream
	return cp
}

// resume continues the stored session st on stream s, at the END of the
// caller's repeated first request.
func (l *loopLogic) resume(c actors.WrapperContext, s *loopSession, st *messages.LoopSession) {
	ss := l.sess
	s.first = st.GetFirstRequest()
	s.params = s.params[:0]
	for _, p := range st.GetParams() {
		s.params = append(s.params, restamp(p, s.stream))
	}
	s.messages = make([]json.RawMessage, len(st.GetMessages()))
	for i, m := range st.GetMessages() {
		s.messages[i] = m
	}
	s.iteration = int(st.GetIteration())
	s.injected = true
	s.text.Reset()
	ev := sessionEvent{Event: "resumed", SessionID: ss.opts.ID, Iteration: s.iteration}

	switch {
	case st.GetPhase() == messages.LoopPhase_LOOP_PHASE_DONE:
		if st.GetText() != "" {
			c.ToOuter(messages.Text(s.stream, st.GetText()))
		}
		ss.active = ""
		c.ToOuter(messages.End(s.stream))
		delete(l.sessions, s.stream)
		return
	case len(st.GetCalls()) == 0:
		l.emitSession(c, s, ev)
		s.phase = phaseModel
		l.sendRequest(c, s)
		return
	}

	midStream := st.GetPhase() == messages.LoopPhase_LOOP_PHASE_MODEL
	s.text.WriteString(st.GetText())
	var rerun []*turnCall
	for _, lc := range st.GetCalls() {
		tc := &turnCall{call: restamp(lc.GetCall(), s.stream)}
		id := tc.call.GetToolCallId()
		switch {
		case lc.GetResult() != nil:
			tc.result = restamp(lc.GetResult(), s.stream)
			ev.Reused = append(ev.Reused, id)
		case lc.GetComplete() && (ss.idempotent[tc.call.GetName()] || l.d.gate.awaiting(c, id)):
			rerun = append(rerun, tc)
			ev.Rerun = append(ev.Rerun, id)
		default:
			tc.result = errorResult(tc.call, FailureInterrupted, interruptedMessage(tc.call.GetName(), midStream, ss.diesWithProcess[tc.call.GetName()]))
			ev.Interrupted = append(ev.Interrupted, id)
		}
		s.calls = append(s.calls, tc)
	}
	l.emitSession(c, s, ev)
	for _, tc := range s.calls {
		c.ToOuter(tc.call)
	}
	s.phase = phaseTools
	ss.persist(c, l, s, messages.LoopPhase_LOOP_PHASE_TOOLS)
	s.dispatching = true
	for _, tc := range rerun {
		l.d.run(c, tc.call)
	}
	s.dispatching = false
	l.maybeFinishRound(c, s)
}

func interruptedMessage(tool string, midStream, stopped bool) string {
	if midStream {
		return fmt.Sprintf("Tool call %s was interrupted: the session stopped while the call was being streamed; it was not run", tool)
	}
	if stopped {
		return fmt.Sprintf("Tool call %s was interrupted: the session stopped while it was running and the call was "+
			"certainly stopped with it (it dies with its process); it was not run again, and what it did before it "+
			"was stopped may remain", tool)
	}
	return fmt.Sprintf("Tool call %s was interrupted: the session stopped while it was running; it was not run again", tool)
}

func (l *loopLogic) emitSession(c actors.WrapperContext, s *loopSession, ev sessionEvent) {
	c.ToOuter(messages.Meta(s.stream, MetaSession, mustJSON(ev)))
}
