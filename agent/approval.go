package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/tools"
)

// WaitingError is returned by [Agent.Run], [Agent.Stream] and
// [Agent.Resume] when the conversation waits for a person: the approval
// policy ([Options].Approval) held the calls in Pending (in call order)
// and nothing else of the round runs any more. The answer returned with
// it is what was answered so far. A pending call's Arguments are those of
// its TOOL_CALL ([EventToolCall]), byte for byte as the model sent them.
//
// Nothing waits in memory for the answer but the held calls' entries in
// the session's loop (without a Store, also the session's stream of the
// agent's loop, which keeps what the loop says meanwhile for Resume): no
// goroutine. Without a Store that memory is kept until Resume, [Agent.Discard]
// or [Agent.Close]: a host that may never answer discards the session
// ([Agent.Waiting] lists them). With a Store the session's loop is
// stopped and the held calls are in the store, so the answer can come
// from another process, days later. Give it with [Agent.Resume].
type WaitingError struct {
	// Agent is the name of the agent ([Options].Name); Session is the
	// waiting session's id.
	Agent   string
	Session string
	Pending []tools.ApprovalRequest
}

func (e *WaitingError) Error() string {
	ids := make([]string, len(e.Pending))
	for i, p := range e.Pending {
		ids[i] = p.Tool + " " + p.ToolCallID
	}
	return fmt.Sprintf("%s: session %q waits for approval of %s", agentOf(e.Agent), clip(e.Session), strings.Join(ids, ", "))
}

// Approve approves the held call id: it runs as the model made it.
func Approve(id string) tools.ApprovalAnswer {
	return tools.ApprovalAnswer{ToolCallID: id, Decision: tools.DecisionApprove}
}

// Deny denies the held call id; message (optional) is told to the model,
// which goes on without the call's effect.
func Deny(id, message string) tools.ApprovalAnswer {
	return tools.ApprovalAnswer{ToolCallID: id, Decision: tools.DecisionDeny, Message: message}
}

// Edit runs the held call id with args instead of the model's arguments
// (they are validated against the tool's schema first).
func Edit(id string, args json.RawMessage) tools.ApprovalAnswer {
	return tools.ApprovalAnswer{ToolCallID: id, Decision: tools.DecisionEdit, Arguments: args}
}

// ErrNotWaiting is returned by [Agent.Resume] and [Agent.Discard] without
// a Store for a session that does not wait for approval (never did, was
// resumed or discarded already).
var ErrNotWaiting = errors.New("agent: session does not wait for approval")

// ErrInvalidDecision is returned by [Agent.Resume] for decisions that
// cannot be applied: one without a tool call id, one whose Decision is
// not approve, deny or edit, or two different ones about the same call.
// Nothing is sent: the held calls wait as they did.
var ErrInvalidDecision = errors.New("agent: invalid approval decision")

// ErrGracePassed is returned by [Agent.Discard] when CancelGrace passed
// before the loop had ended the discarded conversation: the session is
// discarded all the same, and the agent waits for that end in the
// background (a Run of the session meanwhile waits for it). It is not
// context.DeadlineExceeded, which Discard returns only when the deadline
// of its own ctx passed first.
var ErrGracePassed = errors.New("agent: the loop did not end the conversation within CancelGrace")

// ErrWaiting is returned by [Agent.Run] and [Agent.Stream] without a
// Store for a session that waits for approval: answer with
// [Agent.Resume].
var ErrWaiting = errors.New("agent: session waits for approval; answer with Resume")

type decisionsKey struct{}

// Resume continues the conversation of session sessionID that waits for
// approval (a *[WaitingError] of Run, Stream or an earlier Resume) with
// decisions about its held calls, and runs it on to its final answer as
// Run does, its Answer never nil as Run's. msgs are the conversation's
// messages as given to Run: with a
// Store the session is resumed from the store by them, as Run resumes
// one; without a Store they are not used (nil will do): the agent keeps
// the Run's messages and rounds with the waiting session, and sends them
// again, as Run would, if an attempt fails. Held calls without a decision keep
// waiting: Resume returns a *WaitingError listing them once nothing else
// runs, at once when it applies no decision (none given, or only about
// calls that do not wait) and no held call has a deadline. Decisions about
// calls that do not wait (answered already, their deadline passed, or
// cancelled when the agent's loop restarted) are ignored, and a decision
// applies only to the held call it was made for: when an attempt fails
// and the conversation is sent again (as Run does), a call the model
// makes anew, even of the same id, is held anew, and Resume returns a
// *WaitingError for it. Decisions that cannot be applied (no id, a Decision other than
// approve, deny or edit, two different ones about one call) are an error
// wrapping [ErrInvalidDecision], and nothing is sent: the calls wait on.
// An [Edit] whose arguments are not JSON denies the call, the model told
// why. A session that holds no call (never ran, was answered) gives
// [ErrNotWaiting], with a Store too. A Resume whose ctx ends before it has
// sent the decisions (ended already, or while the agent's loop starts)
// returns ctx's error and leaves the session waiting as it was; one whose
// ctx ends later cancels the conversation as Run does.
//
// Without a Store the held calls wait in the agent's loop, and only this
// agent can resume them. A deadline (tools.ApprovalOptions.Deadline) that
// passes before Resume lets the conversation go on meanwhile (the call
// denied): what it answered is kept, and Resume reads it, waiting only for
// what is still to come, as Run would have.
//
// With a Store, Resume works in any process that opens the same store,
// and a decision is applied once: an approved call runs once even when
// the process dies meanwhile (a later resume reports it interrupted if
// it had not finished).
func (a *Agent) Resume(ctx context.Context, sessionID string, msgs []models.Message, decisions ...tools.ApprovalAnswer) (*models.Answer, error) {
	if decisions == nil {
		decisions = []tools.ApprovalAnswer{}
	}
	ans, err := a.run(context.WithValue(ctx, decisionsKey{}, decisions), sessionID, msgs, nil, nil, false)
	return answered(ans), err
}

// approvalState is a conversation's part in approvals.
//
// A decision applies to the held call it was made for, never to a later
// call of the same id (ids are the model's, and a retry's model may make
// the same ones): it is sent on the stream left waiting (without a
// Store, where that call waits), or, on a stream that resumes a stored
// session, once the loop says it holds the call again
// ([tools.MetaApprovalRequired]); it is forgotten once the loop answers
// the call or refuses the decision, and without a Store when the attempt
// that continued the waiting stream ends (the calls it was made for end
// with that stream's conversation).
type approvalState struct {
	decisions []tools.ApprovalAnswer // not yet applied
	decided   map[string]bool        // the ids of decisions
	sent      map[string]bool        // the ids of decisions sent on the attempt's stream
	stream    string                 // without a Store: the stream a Resume continues on
	held      *actors.MuxStream
	pending   []tools.ApprovalRequest // with held
	ans       *models.Answer
	// waited is the waiting session a Resume without a Store took, put
	// back by keepWaiting when nothing was sent on it.
	waited *waitingStream
	// failed is set once the stream of the attempt (without a Store),
	// or held, gets an ERROR (see waitingStream.failed).
	failed *atomic.Bool
	// args are the arguments of the calls of the attempt's stream, by
	// id, as their TOOL_CALL frames carried them: the model's bytes.
	args map[string]json.RawMessage
}

// called keeps the arguments of f, a TOOL_CALL, for asCalled.
func (ap *approvalState) called(f *messages.Frame) { ap.keep(f.GetToolCallId(), f.GetPayload()) }

// keep keeps the arguments args of the call id for asCalled.
func (ap *approvalState) keep(id string, args json.RawMessage) {
	if ap.args == nil {
		ap.args = map[string]json.RawMessage{}
	}
	ap.args[id] = args
}

// asCalled gives the held calls pending the arguments of their TOOL_CALL
// frames, byte for byte as the model sent them: the loop's approval
// payloads carry them re-encoded (HTML-escaped, compacted), and a person
// asked to approve a command must read what would run.
func (ap *approvalState) asCalled(pending []tools.ApprovalRequest) {
	for i, p := range pending {
		if args, ok := ap.args[p.ToolCallID]; ok {
			pending[i].Arguments = args
		}
	}
}

// waitingStream is a conversation of the shared loop (no Store) that
// waits for approval: its stream, kept open so that the frames the loop
// sends meanwhile (after a deadline denied the held calls) wait for the
// Resume instead of being dropped, and what was answered on it so far.
type waitingStream struct {
	s       *actors.MuxStream
	ans     *models.Answer
	pending []tools.ApprovalRequest // the held calls, as the WaitingError said
	// first, history, rounds and usage are those of the conversation
	// that left the stream waiting (its messages, and the rounds its
	// failed attempts kept): a Resume that sends the conversation again
	// sends them, as the Run would have, and answers with the rounds, as
	// does one that goes on with the stream (ans is the waiting
	// attempt's own answer, without them).
	first   json.RawMessage
	history []json.RawMessage
	rounds  []models.Round
	usage   models.Usage // of the responses of those failed attempts
	// failed is set, on the loop's goroutine, once the stream gets an
	// ERROR: its conversation failed (a restart of the loop answered
	// the held calls as cancelled), and nothing of it waits any more.
	failed *atomic.Bool
}

// answerOf starts the answer of an attempt on stream: a Resume without a
// Store goes on with the answer of the stream left waiting.
func (c *conversation) answerOf(stream string) *models.Answer {
	if ap := c.approval; ap != nil && ap.ans != nil && ap.stream == stream {
		return ap.ans
	}
	return models.NewAnswer(stream)
}

// resuming reports whether ctx is that of a Resume, which may go on
// without messages (without a Store, the held conversation is in the
// loop).
func resuming(ctx context.Context) bool {
	_, ok := ctx.Value(decisionsKey{}).([]tools.ApprovalAnswer)
	return ok
}

// prepareApproval reads the decisions of a Resume (ctx), checks them and
// the session's state (without a Store, in the shared loop; with one, in
// the store) and keeps those about calls that wait. A Resume that applies
// none, while no held call has a deadline that lets the conversation go
// on by itself, returns the session's *WaitingError at once, with what was
// answered so far: nothing is sent and the calls wait on.
func (c *conversation) prepareApproval(ctx context.Context) (*models.Answer, error) {
	a := c.a
	decisions, resuming := ctx.Value(decisionsKey{}).([]tools.ApprovalAnswer)
	if !resuming && a.opts.Approval == nil {
		return nil, nil
	}
	decisions, err := checkDecisions(decisions)
	if err != nil {
		return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), err)
	}
	c.approval = &approvalState{decided: map[string]bool{}, sent: map[string]bool{}}
	switch {
	case resuming && a.opts.Store != nil: // the held calls are in the store
		pending, err := tools.ReadApprovals(a.opts.Store, a.SessionKey(c.session))
		if err != nil {
			return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), err)
		}
		if len(pending) == 0 {
			return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), ErrNotWaiting)
		}
		if c.resumed != nil { // the held calls' round, as stored
			for _, lc := range c.resumed.calls {
				c.approval.called(lc.GetCall())
			}
			c.approval.asCalled(pending)
		}
		return c.apply(decisions, pending, &models.Answer{})
	case c.ownLoop():
		// A Run with a Store (a Resume's is above), or a delegation
		// (AsTool's handler runs it with its tool call's ctx, never a
		// Resume's): no decision to keep, and nothing waits in memory. A
		// delegation's held calls die with its loop.
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ws, waiting := a.waiting[c.session]
	switch {
	case resuming && !waiting:
		return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), ErrNotWaiting)
	case !resuming && waiting:
		return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), ErrWaiting)
	case resuming:
		// The conversation is the Run's: sent again, it is sent as the
		// Run would have, whatever messages the Resume was given, and
		// its answer holds the rounds the Run kept.
		c.first, c.history = ws.first, slices.Clip(ws.history)
		// Copies: the answer the Resume returns is the host's, as the
		// Run's was (see waitingFor), and the session may wait on.
		c.keptRounds, c.keptUsage = cloneRounds(ws.rounds), ws.usage
		kept := *ws.ans
		kept.Rounds = cloneRounds(kept.Rounds)
		if ans, err := c.apply(decisions, ws.pending, c.result(&kept)); err != nil {
			return ans, err // what the Run answered
		}
		delete(a.waiting, c.session)
		c.approval.stream, c.approval.held, c.approval.ans, c.approval.pending = ws.s.ID(), ws.s, ws.ans, ws.pending
		c.approval.waited = ws
		for _, p := range ws.pending { // as called: the stream gives their TOOL_CALLs no more
			c.approval.keep(p.ToolCallID, p.Arguments)
		}
		c.approval.failed = ws.failed
	}
	return nil, nil
}

// apply keeps the decisions about calls in pending (those the session
// waits for) to be sent, and returns the session's *WaitingError (with
// ans) when there are none and no pending call has a deadline.
func (c *conversation) apply(decisions []tools.ApprovalAnswer, pending []tools.ApprovalRequest, ans *models.Answer) (*models.Answer, error) {
	ap := c.approval
	deadline := false
	for _, p := range pending {
		deadline = deadline || !p.Deadline.IsZero()
		for _, d := range decisions {
			if d.ToolCallID == p.ToolCallID {
				ap.decisions = append(ap.decisions, d)
				ap.decided[d.ToolCallID] = true
			}
		}
	}
	if len(ap.decisions) == 0 && !deadline {
		return ans, &WaitingError{Agent: c.a.opts.Name, Session: c.session, Pending: pending}
	}
	return nil, nil
}

// checkDecisions returns the decisions of a Resume without repeats, or
// an error wrapping ErrInvalidDecision for one the loop cannot apply or
// two different ones about one call.
func checkDecisions(decisions []tools.ApprovalAnswer) ([]tools.ApprovalAnswer, error) {
	out := decisions[:0:0]
	seen := make(map[string]tools.ApprovalAnswer, len(decisions))
	for _, d := range decisions {
		if err := d.Check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
		}
		prev, dup := seen[d.ToolCallID]
		switch {
		case !dup:
			seen[d.ToolCallID] = d
			out = append(out, d)
		case prev.Decision != d.Decision || prev.Message != d.Message || !bytes.Equal(prev.Arguments, d.Arguments):
			return nil, fmt.Errorf("%w: two different decisions about %s (%s and %s)", ErrInvalidDecision, d.ToolCallID, prev.Decision, d.Decision)
		}
	}
	return out, nil
}

// keepWaiting puts a Resume's session back among those waiting when the
// Resume returns before an attempt took its held stream (its ctx ended
// while the shared loop's start was under way, the start failed): nothing
// was sent on the stream, so the held calls still wait, and the session
// waits for another Resume, Discard or Close as before.
func (c *conversation) keepWaiting() {
	ap := c.approval
	if ap == nil || ap.held == nil {
		return
	}
	a := c.a
	a.mu.Lock()
	if a.waiting == nil {
		a.waiting = map[string]*waitingStream{}
	}
	a.waiting[c.session] = ap.waited // as it was: nothing was sent on it
	a.mu.Unlock()
	ap.held = nil
}

// open sends the attempt's request on s (the first request, or nothing
// when it continues a waiting stream of the shared loop), and after it
// the decisions of a Resume when it continues the waiting stream, where
// their calls wait. On a stream that resumes a stored session they are
// sent once the loop holds their calls again (see sendDecision); without
// a Store a new stream holds none of their calls, and they are dropped.
func (c *conversation) open(s *actors.MuxStream, payload json.RawMessage) error {
	stream := s.ID()
	ap := c.approval
	continuing := ap != nil && ap.stream == stream
	if ap != nil {
		ap.stream = "" // a later attempt sends the conversation again
		clear(ap.sent)
		if !continuing && c.a.opts.Store == nil {
			ap.decisions = nil
			clear(ap.decided)
		}
	}
	if !continuing {
		if err := s.SendAll(messages.RawParam(stream, models.ParamMessages, payload), messages.End(stream)); err != nil {
			return err
		}
	}
	if ap == nil || !continuing {
		return nil
	}
	for _, d := range ap.decisions {
		if err := c.sendDecision(s, d.ToolCallID); err != nil {
			return err
		}
	}
	return nil
}

// sendDecision sends the decision about call id on s, once per attempt.
func (c *conversation) sendDecision(s *actors.MuxStream, id string) error {
	ap := c.approval
	if !ap.decided[id] || ap.sent[id] {
		return nil
	}
	for _, d := range ap.decisions {
		if d.ToolCallID == id {
			ap.sent[id] = true
			return s.Send(tools.ApprovalFrame(s.ID(), d))
		}
	}
	return nil
}

// applied forgets the decision about call id: the loop answered the
// call, or refused the decision.
func (ap *approvalState) applied(id string) {
	if !ap.decided[id] {
		return
	}
	delete(ap.decided, id)
	delete(ap.sent, id)
	ap.decisions = slices.DeleteFunc(ap.decisions, func(d tools.ApprovalAnswer) bool { return d.ToolCallID == id })
}

// follow keeps the decisions in step with f, a frame of the attempt's
// stream s: a call answered, or a decision refused, is one applied; a
// call the loop holds again, resuming a stored session, gets its
// decision.
func (c *conversation) follow(f *messages.Frame, s *actors.MuxStream) error {
	ap := c.approval
	if len(ap.decided) == 0 {
		return nil
	}
	switch {
	case f.GetType() == messages.FrameType_TOOL_RESULT:
		ap.applied(f.GetToolCallId())
	case f.GetType() != messages.FrameType_META:
	case f.GetName() == tools.MetaApprovalRefused:
		var r tools.ApprovalRefusal
		if err := json.Unmarshal(f.GetPayload(), &r); err != nil {
			return fmt.Errorf("agent %q: read %s: %w", clip(c.a.opts.Name), tools.MetaApprovalRefused, err)
		}
		if ap.sent[r.ToolCallID] {
			ap.applied(r.ToolCallID)
		}
	case f.GetName() == tools.MetaApprovalRequired:
		var r tools.ApprovalRequest
		if err := json.Unmarshal(f.GetPayload(), &r); err != nil {
			return fmt.Errorf("agent %q: read %s: %w", clip(c.a.opts.Name), tools.MetaApprovalRequired, err)
		}
		return c.sendDecision(s, r.ToolCallID)
	}
	return nil
}

// heldStream takes the stream a Resume without a Store continues, if
// stream is it: the attempt reads on where the waiting one stopped.
func (c *conversation) heldStream(stream string) *actors.MuxStream {
	ap := c.approval
	if ap == nil || ap.held == nil || ap.held.ID() != stream {
		return nil
	}
	s := ap.held
	ap.held = nil
	return s
}

// streamOf is the stream of an attempt: a Resume without a Store goes on
// on the stream left waiting.
func (c *conversation) streamOf(stream string) string {
	if c.approval != nil && c.approval.stream != "" {
		return c.approval.stream
	}
	return stream
}

// waitingFor returns a *WaitingError when f says the round waits for
// calls no decision of this conversation answers. On the shared loop it
// keeps s, f's stream, for the Resume, and reports so: the caller leaves
// it open.
func (c *conversation) waitingFor(f *messages.Frame, ans *models.Answer, s *actors.MuxStream) (kept bool, err error) {
	if c.approval == nil {
		return false, nil
	}
	if f.GetType() == messages.FrameType_TOOL_CALL {
		c.approval.called(f)
	}
	if err := c.follow(f, s); err != nil {
		return false, err
	}
	if f.GetType() != messages.FrameType_META || f.GetName() != tools.MetaApprovalWaiting {
		return false, nil
	}
	var w tools.ApprovalWaiting
	if err := json.Unmarshal(f.GetPayload(), &w); err != nil {
		return false, fmt.Errorf("agent %q: read %s: %w", clip(c.a.opts.Name), tools.MetaApprovalWaiting, err)
	}
	c.approval.asCalled(w.Pending)
	open := w.Pending[:0:0]
	for _, p := range w.Pending {
		if !c.approval.sent[p.ToolCallID] {
			open = append(open, p)
		}
	}
	if len(open) == 0 || len(open) < len(w.Pending) {
		// Decisions sent are still on their way: the loop answers each
		// call or refuses its decision, then says so again if anything
		// still waits.
		return false, nil
	}
	if !c.ownLoop() {
		c.a.mu.Lock()
		// Not once closed (Close cancelled the conversation in its
		// consumer's body): no Resume can come, and Close has closed the
		// waiting streams already.
		if !c.a.closed {
			if c.a.waiting == nil {
				c.a.waiting = map[string]*waitingStream{}
			}
			// Copies: the Run merges the kept rounds into the answer it
			// returns (see result), and a Resume goes on with the
			// attempt's own, merging them again; and that answer is the
			// host's, which may change it before a Resume answers with
			// these rounds.
			own := *ans
			own.Rounds = cloneRounds(own.Rounds)
			c.a.waiting[c.session] = &waitingStream{s: s, ans: &own, pending: w.Pending, failed: c.approval.failed,
				first: c.first, history: c.history, rounds: cloneRounds(c.keptRounds), usage: c.keptUsage}
			kept = true
		}
		c.a.mu.Unlock()
	}
	return kept, &WaitingError{Agent: c.a.opts.Name, Session: c.session, Pending: open}
}

// ResumeStream is [Agent.Resume] as a sequence of events, as
// [Agent.Stream] gives them.
func (a *Agent) ResumeStream(ctx context.Context, sessionID string, msgs []models.Message, decisions ...tools.ApprovalAnswer) iter.Seq2[Event, error] {
	if decisions == nil {
		decisions = []tools.ApprovalAnswer{}
	}
	return a.Stream(context.WithValue(ctx, decisionsKey{}, decisions), sessionID, msgs)
}

// Discard gives up the session sessionID that waits for approval without
// a Store: its held calls are answered as cancelled (each gets its one
// result; none runs), its conversation ends, and the agent forgets it, so
// a later Resume of it fails with [ErrNotWaiting]. A host that may leave
// a session unanswered discards it, or the agent keeps it (its loop's
// entries and what the loop says meanwhile) until Close. Discard waits,
// for CancelGrace at most, until the loop has ended the conversation:
// past CancelGrace it returns an error wrapping [ErrGracePassed], and
// ctx's error if ctx ends first (either way the session is discarded all
// the same, and the agent waits for that end in the background: a Run
// of the session meanwhile waits for it, as after a cancelled Run). It
// waits as Run does, too, while a cancelled conversation of the session
// is still being ended. It returns ErrNotWaiting for a session that does not wait,
// [ErrSessionBusy] while a Run or Resume of it runs, [ErrClosed] once the
// agent is closed, and an error with a Store: a durable session waits in
// the store, not in memory (deny its calls with Resume).
func (a *Agent) Discard(ctx context.Context, sessionID string) error {
	if err := a.usable(); err != nil {
		return err
	}
	if err := checkSession(sessionID); err != nil {
		return err
	}
	switch {
	case a.opts.Store != nil:
		return fmt.Errorf("agent %q: discard session %q: a durable session waits in its store, not in memory; deny its calls with Resume",
			clip(a.opts.Name), clip(sessionID))
	}
	if _, err := a.enter(ctx, sessionID, nil); err != nil {
		return err
	}
	var drain *actors.MuxStream
	defer func() { a.leave(sessionID, nil, drain, nil) }()
	a.mu.Lock()
	ws, ok := a.waiting[sessionID]
	delete(a.waiting, sessionID)
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrNotWaiting)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, a.opts.CancelGrace, ErrGracePassed)
	defer cancel()
	err := abortStream(ctx, ws.s, ws.ans, nil)
	switch {
	case err == nil, errors.Is(err, actors.ErrDuplexStopped): // a stopped loop answered the calls
		ws.s.Close()
		return nil
	case ctx.Err() != nil:
		// The loop still ends the conversation: the stream is read to
		// its end in the background, and the session stays taken.
		drain = ws.s
		err = context.Cause(ctx) // ErrGracePassed, or the caller's ctx's own
	default:
		ws.s.Close()
	}
	return fmt.Errorf("agent %q: discard session %q: %w", clip(a.opts.Name), clip(sessionID), err)
}

// Waiting returns the ids of the sessions that wait for approval in
// memory (without a Store), sorted: those a host may [Agent.Resume] or
// [Agent.Discard]. A session whose conversation failed while it waited
// (a restart of the agent's loop answered its held calls as cancelled)
// is not listed: nothing of it waits for a person. The agent keeps it
// all the same: a Resume of it sends the conversation again (see
// Resume: the model's calls made anew are held anew), and Discard or
// Close frees it. With a Store it returns none (see
// tools.ReadApprovals for a stored session).
func (a *Agent) Waiting() []string {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	ids := make([]string, 0, len(a.waiting))
	for id, ws := range a.waiting {
		if ws.failed == nil || !ws.failed.Load() {
			ids = append(ids, id)
		}
	}
	a.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// cloneRounds returns a copy of rs that shares no memory with it (its
// calls, results and their JSON copied too), with no room to append to
// in place; nil for none.
func cloneRounds(rs []models.Round) []models.Round {
	if len(rs) == 0 {
		return nil
	}
	out := make([]models.Round, len(rs))
	for i, r := range rs {
		out[i] = models.Round{Text: r.Text, Calls: slices.Clip(slices.Clone(r.Calls)), Results: slices.Clip(slices.Clone(r.Results))}
		for j := range out[i].Calls {
			out[i].Calls[j].Arguments = bytes.Clone(out[i].Calls[j].Arguments)
		}
		for j := range out[i].Results {
			out[i].Results[j].Content = bytes.Clone(out[i].Results[j].Content)
		}
	}
	return out
}
