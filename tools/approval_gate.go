package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
)

// The states of a held call in the stored record.
const (
	heldAsked  = "asked"  // waiting for an answer
	heldDenied = "denied" // denied; the result may not be stored yet
)

// heldEntry is a held call in the record. An approved call is not in
// it: it is removed before the call runs, so that a session resumed
// after a crash reports the approved call as interrupted, never runs it
// twice.
type heldEntry struct {
	// Stream is the call's stream in the record of a loop without a
	// store, which holds the calls of all its streams (call ids are the
	// model's: two streams may hold calls of one id at once). It is
	// empty in a stored record (see approvalGate.recKey), never stored.
	Stream    string          `json:"-"`
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Reason    string          `json:"reason,omitempty"`
	Deadline  time.Time       `json:"deadline,omitzero"`
	State     string          `json:"state"`
	Message   string          `json:"message,omitempty"`
}

func (e *heldEntry) request() ApprovalRequest {
	return ApprovalRequest{ToolCallID: e.ID, Tool: e.Tool, Arguments: e.Arguments, Reason: e.Reason, Deadline: e.Deadline}
}

// approvalRecord is the record of held calls: with a store, a session's,
// stored as a JSON snapshot rewritten whole at each change (it holds one
// round's calls at most); without one, the loop's, in memory. Its calls
// are keyed by stream and id (see approvalGate.recKey).
type approvalRecord struct {
	index uint64
	Held  []*heldEntry `json:"held"`
}

func (e *heldEntry) is(k callKey) bool { return e.Stream == k.stream && e.ID == k.id }

func (r *approvalRecord) find(k callKey) *heldEntry {
	for _, e := range r.Held {
		if e.is(k) {
			return e
		}
	}
	return nil
}

func (r *approvalRecord) remove(k callKey) {
	r.Held = slices.DeleteFunc(r.Held, func(e *heldEntry) bool { return e.is(k) })
}

func storeContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(context.Background(), timeout)
	}
	return context.Background(), func() {}
}

func loadApprovalRecord(store durability.Store, sessionID string, timeout time.Duration) (*approvalRecord, error) {
	ctx, cancel := storeContext(timeout)
	defer cancel()
	name := sessionID + ApprovalStoreSuffix
	snap, ok, err := store.GetSnapshot(ctx, name)
	rec := &approvalRecord{}
	switch {
	case err != nil:
		return nil, fmt.Errorf("load approvals of session %q: %w", sessionID, err)
	case !ok:
		return rec, nil
	}
	if err := json.Unmarshal(snap.Data, rec); err != nil {
		return nil, fmt.Errorf("load approvals of session %q: %w", sessionID,
			&durability.StoreError{Op: durability.OpDecode, Name: name, Err: err})
	}
	rec.index = snap.Index
	return rec, nil
}

// approvalGate holds back the calls its policy asks about, inside the
// dispatcher of a loop: a held call is a map entry (and a timer with a
// deadline), no goroutine. It lives inside one actor.
type approvalGate struct {
	opts  *ApprovalOptions
	store durability.Store // nil: nothing is persisted
	id    string
	tmo   time.Duration

	described map[string]Description
	rec       *approvalRecord // nil until loaded
	held      map[callKey]*heldCall
	pass      map[callKey]bool // approved: the next run of the call is not held
}

type heldCall struct {
	call *messages.Frame
	slot *slot
	req  ApprovalRequest
	stop func() bool
}

// approvalDeadline is the timer key of a held call's deadline.
type approvalDeadline struct{ key callKey }

func newApprovalGate(opts *ApprovalOptions, session *SessionOptions, all []*Tool) *approvalGate {
	if opts == nil {
		return nil
	}
	g := &approvalGate{opts: opts, described: map[string]Description{}, held: map[callKey]*heldCall{}, pass: map[callKey]bool{}}
	for _, t := range all {
		g.described[t.Name()] = t.Description()
	}
	if session != nil {
		g.store, g.id, g.tmo = session.Store, session.ID, session.Timeout
	}
	return g
}

// load reads the stored record once per incarnation.
func (g *approvalGate) load(c actors.Context) {
	if g.rec != nil {
		return
	}
	if g.store == nil {
		g.rec = &approvalRecord{}
		return
	}
	rec, err := loadApprovalRecord(g.store, g.id, g.tmo)
	if err != nil {
		c.Fail(err)
	}
	g.rec = rec
}

// save persists the record (with a store) before the loop acts on it.
func (g *approvalGate) save(c actors.Context) {
	if g.store == nil {
		return
	}
	g.rec.index++
	data := mustJSON(g.rec)
	ctx, cancel := storeContext(g.tmo)
	defer cancel()
	if err := g.store.PersistSnapshot(ctx, g.id+ApprovalStoreSuffix, g.rec.index, data); err != nil {
		c.Fail(fmt.Errorf("persist approvals of session %q: %w", g.id, err))
	}
}

// recKey is the key of the call of key in the record. Without a store
// the record is the loop's, for every stream it serves: a call is its
// stream's and id's. With one it is one session's, which runs on one
// stream at a time (see sessionState.admit) and on a new one at each
// resume (see restamp): a call is its id's, in the session.
func (g *approvalGate) recKey(key callKey) callKey {
	if g.store != nil {
		return callKey{id: key.id}
	}
	return key
}

// awaiting reports whether the stored session holds the call with this id
// (asked, or denied without its result stored yet): a resumed session
// dispatches it again instead of calling it interrupted, or, when the
// caller had cancelled it, answers it as cancelled while it waited.
func (g *approvalGate) awaiting(c actors.Context, id string) bool {
	if g == nil {
		return false
	}
	g.load(c)
	return g.rec.find(callKey{id: id}) != nil
}

// heldRecord is the record of held calls of a loop without an approval
// policy that resumes the stored session (nil without one): a loop with a
// policy may have held calls in it before the stop, which this loop
// answers as not run (see unapprovedMessage) and forgets. It only reads
// and forgets: it holds nothing.
func heldRecord(session *SessionOptions) *approvalGate {
	if session == nil || session.Store == nil {
		return nil
	}
	return &approvalGate{store: session.Store, id: session.ID, tmo: session.Timeout}
}

// unapprovedMessage is the result of a call that waited for approval when
// the session stopped, resumed by a loop without an approval policy.
func unapprovedMessage(tool string) string {
	return fmt.Sprintf("Tool call %s was not run: it was waiting for approval when the session stopped, and the session "+
		"was resumed without an approval policy to ask for it", tool)
}

// heldCancelled is the message of the result of a call cancelled while it
// waited for approval.
const heldCancelled = "Tool call cancelled while it waited for approval"

// discard forgets the stored session's held call id, if it holds it: the
// call was cancelled before the session stopped and answered by a
// resume. A resume stores the call's result first: a record that still
// holds a call with a stored result (the store failed in between)
// changes nothing, as a resume gives a stored result before it asks the
// gate.
func (g *approvalGate) discard(c actors.Context, id string) {
	g.forget(c, callKey{id: id})
}

// forget removes the call of key from the record, if it holds it: the
// call was approved or cancelled.
func (g *approvalGate) forget(c actors.Context, key callKey) {
	g.load(c)
	k := g.recKey(key)
	if g.rec.find(k) == nil {
		return
	}
	g.rec.remove(k)
	g.save(c)
}

// hold decides whether call (of the tool in s) runs now: false lets it
// run; true means the gate answered it (denied) or holds it.
func (g *approvalGate) hold(c actors.WrapperContext, d *dispatcher, call *messages.Frame, s *slot) bool {
	key := keyOf(call)
	if g.pass[key] {
		delete(g.pass, key)
		return false
	}
	if _, dup := g.held[key]; dup {
		c.Logger().Warn("duplicate tool call dropped: it waits for approval", "tool", call.GetName(), "tool_call_id", key.id)
		return true
	}
	g.load(c)
	if e := g.rec.find(g.recKey(key)); e != nil { // resumed: held before the stop
		if e.State == heldDenied {
			g.deny(c, d, call, e.Message)
			return true
		}
		g.park(c, d, call, s, e.request())
		return true
	}
	var deadline time.Time
	if g.opts.Deadline > 0 {
		deadline = g.opts.Now().Add(g.opts.Deadline).UTC().Truncate(time.Millisecond)
	}
	verdict, reason, p := g.decide(ApprovalCall{StreamID: key.stream, ToolCallID: key.id,
		Tool: g.described[call.GetName()], Arguments: call.GetPayload(), Deadline: deadline})
	if p != nil {
		// The host's code failed on this call: it is denied (never run
		// unapproved), and the loop goes on serving its other calls and
		// streams (see ApprovalPolicy).
		d.deliver(c, call, errorResult(call, FailureDenied, fmt.Sprintf("Tool call %s was denied: the approval policy panicked: %v; it was not run", call.GetName(), p.value)))
		logPanic(c.Logger(), call, "approval policy", p.value, p.stack)
		return true
	}
	switch verdict {
	case VerdictRun:
		return false
	case VerdictDeny:
		if reason == "" {
			reason = "the approval policy does not allow it"
		}
		d.deliver(c, call, errorResult(call, FailureDenied, fmt.Sprintf("Tool call %s was denied: %s; it was not run", call.GetName(), reason)))
		return true
	}
	req := ApprovalRequest{ToolCallID: key.id, Tool: call.GetName(), Arguments: call.GetPayload(), Reason: reason, Deadline: deadline}
	k := g.recKey(key)
	g.rec.Held = append(g.rec.Held, &heldEntry{Stream: k.stream, ID: k.id, Tool: req.Tool, Arguments: req.Arguments,
		Reason: reason, Deadline: req.Deadline, State: heldAsked})
	g.save(c) // persisted before the consumer is asked
	g.park(c, d, call, s, req)
	return true
}

// policyPanic is a panic of the approval policy.
type policyPanic struct {
	value any
	stack []byte
}

// decide asks the policy about call; a panic of the policy is returned
// (with its stack) instead of failing the loop.
func (g *approvalGate) decide(call ApprovalCall) (verdict Verdict, reason string, p *policyPanic) {
	defer func() {
		if r := recover(); r != nil {
			p = &policyPanic{value: r, stack: debug.Stack()}
		}
	}()
	verdict, reason = g.opts.Policy(call)
	return verdict, reason, nil
}

// park keeps call waiting and asks the consumer.
func (g *approvalGate) park(c actors.WrapperContext, d *dispatcher, call *messages.Frame, s *slot, req ApprovalRequest) {
	key := keyOf(call)
	h := &heldCall{call: call, slot: s, req: req}
	if !req.Deadline.IsZero() {
		left := req.Deadline.Sub(g.opts.Now())
		if left <= 0 {
			g.expired(c, d, call)
			return
		}
		h.stop = c.After(left, approvalDeadline{key})
	}
	g.held[key] = h
	c.ToOuter(messages.Meta(key.stream, MetaApprovalRequired, mustJSON(req)))
}

// deny answers call as denied by a person (or the deadline) and forgets
// it: the denial is persisted, then delivered (the loop stores the
// result), then removed from the record.
func (g *approvalGate) deny(c actors.WrapperContext, d *dispatcher, call *messages.Frame, message string) {
	k := g.recKey(keyOf(call))
	if e := g.rec.find(k); e != nil && g.store != nil && e.State != heldDenied {
		e.State, e.Message = heldDenied, message
		g.save(c)
	}
	d.deliver(c, call, errorResult(call, FailureDenied, message))
	if g.rec.find(k) != nil {
		g.rec.remove(k)
		g.save(c)
	}
}

func (g *approvalGate) expired(c actors.WrapperContext, d *dispatcher, call *messages.Frame) {
	g.deny(c, d, call, fmt.Sprintf("Tool call %s was denied: no approval came within %v; it was not run", call.GetName(), g.opts.Deadline))
}

// release forgets a held call, stopping its deadline.
func (g *approvalGate) release(key callKey) *heldCall {
	h := g.held[key]
	if h == nil {
		return nil
	}
	delete(g.held, key)
	if h.stop != nil {
		h.stop()
	}
	return h
}

// answer applies an approval frame on the request path. It returns the
// refusal of one it cannot apply (malformed, or about a call that is not
// held: answered already, its deadline passed, never held), having
// changed nothing; nil once the answer is applied.
func (g *approvalGate) answer(c actors.WrapperContext, d *dispatcher, f *messages.Frame) *ApprovalRefusal {
	var a ApprovalAnswer
	if err := json.Unmarshal(f.GetPayload(), &a); err != nil {
		return refusal(a, RefusedInvalid, fmt.Errorf("%w: the payload is not an approval answer: %v", ErrInvalidAnswer, err))
	}
	if err := a.Check(); err != nil {
		return refusal(a, RefusedInvalid, err)
	}
	key := callKey{f.GetStreamId(), a.ToolCallID}
	h := g.release(key)
	if h == nil {
		return refusal(a, RefusedNotHeld, fmt.Errorf("%w: no call %s waits on stream %q (answered already, denied when its deadline passed, or never held)",
			ErrNotHeld, a.ToolCallID, key.stream))
	}
	call := h.call
	switch a.Decision {
	case DecisionDeny:
		msg := fmt.Sprintf("Tool call %s was denied by the person supervising this session; it was not run", call.GetName())
		if a.Message != "" {
			msg = fmt.Sprintf("Tool call %s was denied by the person supervising this session (it was not run): %s", call.GetName(), a.Message)
		}
		g.deny(c, d, call, msg)
		return nil
	case DecisionEdit:
		if !json.Valid(a.Arguments) { // see ApprovalFrame
			msg := fmt.Sprintf("Tool call %s was not run: the arguments a person edited are not JSON", call.GetName())
			if a.Message != "" {
				msg += ": " + a.Message
			}
			g.deny(c, d, call, msg)
			return nil
		}
		args, err := h.slot.tool.validator.check(a.Arguments)
		var p *validationPanic
		switch {
		case errors.As(err, &p):
			// Denied like invalid arguments (see ApprovalAnswer), then
			// logged: the call, released above, has no answer but this
			// denial, and the loop goes on serving its other calls and
			// sessions.
			g.deny(c, d, call, fmt.Sprintf("Tool call %s was not run: validating the arguments a person edited panicked: %v", call.GetName(), p.value))
			logPanic(c.Logger(), call, "validation", p.value, p.stack)
			return nil
		case err != nil:
			g.deny(c, d, call, fmt.Sprintf("Tool call %s was not run: the arguments a person edited are invalid: %v", call.GetName(), err))
			return nil
		}
		call = messages.CloneFrame(call)
		call.Payload = args
	}
	g.forget(c, key) // approved: forgotten before it runs, so it never runs twice
	g.pass[key] = true
	d.run(c, call)
	delete(g.pass, key) // taken by hold, unless the call was answered before it (a tool gone)
	return nil
}

// cancel answers the held calls a CANCEL or ABORT concerns as cancelled.
func (g *approvalGate) cancel(c actors.WrapperContext, d *dispatcher, f *messages.Frame) {
	for key, h := range g.held {
		if key.stream != f.GetStreamId() {
			continue
		}
		if f.GetType() == messages.FrameType_CANCEL && f.GetToolCallId() != "" && f.GetToolCallId() != key.id {
			continue
		}
		g.release(key)
		d.deliver(c, h.call, errorResult(h.call, FailureCancelled, heldCancelled))
		g.forget(c, key)
	}
}

// timer handles a deadline timer; it reports whether msg was one.
func (g *approvalGate) timer(c actors.WrapperContext, d *dispatcher, msg any) bool {
	t, ok := msg.(actors.Timer)
	if !ok {
		return false
	}
	k, ok := t.Key.(approvalDeadline)
	if !ok {
		return false
	}
	if h := g.release(k.key); h != nil {
		g.expired(c, d, h.call)
	}
	return true
}

// approvalWaiting tells the consumer that the round of s waits for
// approvals only: every call without a result is held.
func (l *loopLogic) approvalWaiting(c actors.WrapperContext, s *loopSession) {
	g := l.d.gate
	if g == nil || len(g.held) == 0 {
		return
	}
	w := ApprovalWaiting{Durable: g.store != nil}
	for _, tc := range s.calls {
		if tc.result != nil {
			continue
		}
		h := g.held[keyOf(tc.call)]
		if h == nil {
			return // something still runs
		}
		w.Pending = append(w.Pending, h.req)
	}
	if len(w.Pending) > 0 {
		c.ToOuter(messages.Meta(s.stream, MetaApprovalWaiting, mustJSON(w)))
	}
}

// approvalAnswer takes an approval frame off the request path (it never
// goes to the model); it reports whether f was one. One that cannot be
// applied is answered with approval_refused, and the stream's round, if
// it waits for held calls only, says so again (see ApprovalRefusal).
func (l *loopLogic) approvalAnswer(c actors.WrapperContext, f *messages.Frame) bool {
	if f.GetType() != messages.FrameType_META || f.GetName() != MetaApproval {
		return false
	}
	var r *ApprovalRefusal
	if l.d.gate == nil {
		var a ApprovalAnswer
		_ = json.Unmarshal(f.GetPayload(), &a) // only to name it in the refusal
		r = refusal(a, RefusedNoPolicy, fmt.Errorf("%w: the answer applies to nothing", ErrNoApprovalPolicy))
	} else if r = l.d.gate.answer(c, l.d, f); r == nil {
		return true
	}
	c.Logger().Warn("approval answer refused", "stream", f.GetStreamId(), "tool_call_id", r.ToolCallID, "reason", r.Reason, "error", r.Error)
	c.ToOuter(messages.Meta(f.GetStreamId(), MetaApprovalRefused, mustJSON(r)))
	if s, ok := l.lookup(f.GetStreamId()); ok && s.phase == phaseTools {
		l.approvalWaiting(c, s)
	}
	return true
}
