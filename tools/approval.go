package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
)

// Names of the META frames of approvals. A loop with an approval policy
// sends [MetaApprovalRequired] (payload: an [ApprovalRequest]) to its
// consumer for each call it holds back, and [MetaApprovalWaiting]
// (payload: an [ApprovalWaiting]) whenever nothing of a round runs any
// more but held calls; the consumer answers with a [MetaApproval] frame
// on the request path (payload: an [ApprovalAnswer], see
// [ApprovalFrame]). An answer the loop cannot apply is answered at once
// with [MetaApprovalRefused] (payload: an [ApprovalRefusal]) on its
// stream.
const (
	MetaApprovalRequired = "approval_required"
	MetaApprovalWaiting  = "approval_waiting"
	MetaApproval         = "approval"
	MetaApprovalRefused  = "approval_refused"
)

// FailureDenied is the failure kind of a call an approval policy or a
// person refused, or whose approval deadline passed: it was not run.
const FailureDenied FailureKind = "denied"

// Verdict is what an [ApprovalPolicy] decides about one call.
type Verdict int

// The verdicts.
const (
	// VerdictRun runs the call now.
	VerdictRun Verdict = iota
	// VerdictDeny answers the call as failed ([FailureDenied]) with the
	// policy's reason, without running it; the model goes on.
	VerdictDeny
	// VerdictAsk holds the call until a person answers (or the deadline
	// passes).
	VerdictAsk
)

func (v Verdict) String() string {
	switch v {
	case VerdictRun:
		return "run"
	case VerdictDeny:
		return "deny"
	case VerdictAsk:
		return "ask"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// ApprovalCall is what an [ApprovalPolicy] decides on: the tool as it
// describes itself (capabilities, reversible, transactional...) and the
// call's arguments.
type ApprovalCall struct {
	StreamID   string
	ToolCallID string
	Tool       Description
	Arguments  json.RawMessage
	// Deadline is when the call is denied if the policy asks and nobody
	// answers (ApprovalOptions.Deadline from now, to the millisecond, as
	// the approval_required frame says); zero without a deadline.
	Deadline time.Time
}

// ReadOnly reports whether the tool only reads ([Description.ReadOnly]):
// it declared "read" as its only capability. A tool that declared no
// capabilities is not read-only, though it is described with the
// default ["read"].
func (c ApprovalCall) ReadOnly() bool {
	return c.Tool.ReadOnly()
}

// ApprovalPolicy decides, per call, whether it runs, is denied or waits
// for a person; the string is the reason given to the model (deny) or the
// person (ask). It runs on the loop actor's goroutine: quick, never
// blocking. A policy that panics on a call denies that call
// ([FailureDenied], the model told the policy panicked, the panic
// logged): it is not run unapproved, and the loop goes on serving its
// other calls and streams. Package approval has ready-made policies.
type ApprovalPolicy func(ApprovalCall) (Verdict, string)

// DefaultApprovalPolicy runs read-only tools and reversible tools that
// declared their capabilities; it asks for irreversible ones and for a
// tool whose author declared no capabilities
// ([Description.CapabilitiesDeclared]): such a tool is described with
// the default ["read"] and as reversible, the seed's defaults, which say
// nothing of what it does.
func DefaultApprovalPolicy(c ApprovalCall) (Verdict, string) {
	switch {
	case !c.Tool.Reversible:
		return VerdictAsk, fmt.Sprintf("%s is irreversible", c.Tool.Name)
	case !c.Tool.CapabilitiesDeclared():
		return VerdictAsk, UndeclaredCapabilities(c.Tool.Name)
	}
	return VerdictRun, ""
}

// UndeclaredCapabilities is the reason an approval policy gives the
// person it asks about a call of tool, a tool whose author declared no
// capabilities ([Description.CapabilitiesDeclared]): [DefaultApprovalPolicy]
// and the policies of package approval give the same words.
func UndeclaredCapabilities(tool string) string {
	return fmt.Sprintf("%s does not declare its capabilities (what it may change)", tool)
}

// ApprovalOptions give a tool loop an approval policy
// ([LoopOptions].Approval). Options are copied.
//
// A call the policy asks about is held by the loop without a goroutine:
// the loop sends [MetaApprovalRequired] to the consumer and the other
// calls of the round run on. An [ApprovalAnswer] (approve, deny with a
// message for the model, or edit the arguments) makes it run or answers
// it as denied; one the loop cannot apply is refused at once
// ([MetaApprovalRefused]) and changes nothing. With a [SessionOptions]
// store the held calls are persisted (under the session id +
// [ApprovalStoreSuffix]) before the request goes out and each answer
// before it is applied: a loop resuming the session holds them again
// (sending [MetaApprovalRequired] anew) or applies the answer given
// before the stop; an approved call runs once. A loop without an
// approval policy that resumes such a session answers its held calls as
// not run ([FailureDenied], saying they waited for approval), never runs
// them, even an idempotent tool's, and forgets them.
type ApprovalOptions struct {
	// Policy decides per call; nil means [DefaultApprovalPolicy].
	Policy ApprovalPolicy
	// Deadline, when positive, answers a held call as denied once it has
	// waited that long (counted from when it was first held, across
	// restarts).
	Deadline time.Duration
	// Now is the clock of deadlines; nil means time.Now.
	Now func() time.Time
}

// ApprovalStoreSuffix is appended to a session id to name the record of
// its held calls in the session's store.
const ApprovalStoreSuffix = "/approvals"

// ApprovalRequest is the payload of [MetaApprovalRequired].
type ApprovalRequest struct {
	ToolCallID string          `json:"tool_call_id"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	Reason     string          `json:"reason,omitempty"`
	// Deadline is when the call is denied unless answered (RFC 3339);
	// zero when there is none.
	Deadline time.Time `json:"deadline,omitzero"`
}

// ApprovalWaiting is the payload of [MetaApprovalWaiting]: the calls the
// round waits for, in call order.
type ApprovalWaiting struct {
	Pending []ApprovalRequest `json:"pending"`
	// Durable is true when the held calls are persisted in the loop's
	// session store ([SessionOptions]): a loop stopped now leaves them to
	// a later resume. Without a store they wait only in the loop, and a
	// loop stopped now answers them "stopped" for good.
	Durable bool `json:"durable,omitempty"`
}

// The decisions of an [ApprovalAnswer].
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	DecisionEdit    = "edit"
)

// ApprovalAnswer is a person's answer about a held call: the payload of
// [MetaApproval].
type ApprovalAnswer struct {
	ToolCallID string `json:"tool_call_id"`
	// Decision is DecisionApprove, DecisionDeny or DecisionEdit.
	Decision string `json:"decision"`
	// Message, for a deny, is told to the model (a default one otherwise);
	// for an edit whose arguments were not JSON, it says why (see
	// [ApprovalFrame]).
	Message string `json:"message,omitempty"`
	// Arguments, for an edit, replace the call's arguments; they are
	// validated against the tool's schema and the call runs with them.
	// Arguments that fail validation deny the call ([FailureDenied]), and
	// the model is told why. So do arguments whose validation panics: the
	// call is denied, not answered as panicked ([FailurePanic]), on
	// purpose, since the tool never ran and a denial is what the gate
	// records in a durable session's store, so that the session resumed
	// after a stop answers the call with the same denial.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ApprovalFrame is the frame carrying answer on stream. It never fails:
// an edit whose Arguments are not JSON (which no frame can carry) goes
// out without them, its Message saying why, and the loop denies the call
// telling the model so, as it denies an edit whose arguments fail
// validation. An answer that does not [ApprovalAnswer.Check] goes out as
// it is, and the loop refuses it ([MetaApprovalRefused]): check answers
// first.
func ApprovalFrame(stream string, answer ApprovalAnswer) *messages.Frame {
	if answer.Decision == DecisionEdit && answer.Arguments != nil && !json.Valid(answer.Arguments) {
		var v any
		err := json.Unmarshal(answer.Arguments, &v)
		answer.Arguments, answer.Message = nil, err.Error()
	}
	return messages.Meta(stream, MetaApproval, mustJSON(answer))
}

// ErrInvalidAnswer is wrapped by the error of [ApprovalAnswer.Check], and
// by that of the [ApprovalRefusal] of an answer that is not JSON or does
// not check.
var ErrInvalidAnswer = errors.New("invalid approval answer")

// ErrNotHeld is wrapped by the error of an [ApprovalRefusal] of an answer
// about a call that does not wait for approval on the stream: answered
// already, denied when its deadline passed, or never held.
var ErrNotHeld = errors.New("approval answer for a call that does not wait for approval")

// ErrNoApprovalPolicy is wrapped by the error of an [ApprovalRefusal] of
// a loop without an approval policy ([LoopOptions].Approval): it holds
// no call.
var ErrNoApprovalPolicy = errors.New("approval answer to a loop without an approval policy")

// The reasons of an [ApprovalRefusal].
const (
	// RefusedInvalid: the answer is not JSON or does not
	// [ApprovalAnswer.Check] ([ErrInvalidAnswer]).
	RefusedInvalid = "invalid"
	// RefusedNotHeld: no call of that id waits for approval on the
	// stream ([ErrNotHeld]).
	RefusedNotHeld = "not_held"
	// RefusedNoPolicy: the loop has no approval policy
	// ([ErrNoApprovalPolicy]).
	RefusedNoPolicy = "no_policy"
)

// ApprovalRefusal is the payload of [MetaApprovalRefused]: a loop applied
// no answer of the [MetaApproval] frame it refuses, and changed nothing:
// the calls it holds wait as they did, in its memory and in its session
// store. When the round of the frame's stream then waits for held calls
// only, a [MetaApprovalWaiting] listing them follows, so that a consumer
// waiting for one after sending its answers is not left waiting.
type ApprovalRefusal struct {
	// ToolCallID and Decision are the refused answer's, when it could be
	// read.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Decision   string `json:"decision,omitempty"`
	// Reason is RefusedInvalid, RefusedNotHeld or RefusedNoPolicy.
	Reason string `json:"reason"`
	// Error says what was wrong, for people and logs.
	Error string `json:"error"`
}

// Err returns the refusal as an error (its text is Error) wrapping the
// sentinel error of its Reason ([ErrInvalidAnswer], [ErrNotHeld] or
// [ErrNoApprovalPolicy]), so that a host can tell the cases apart with
// errors.Is; a Reason it does not know wraps none.
func (r ApprovalRefusal) Err() error {
	e := &refusalError{msg: r.Error}
	switch r.Reason {
	case RefusedInvalid:
		e.sentinel = ErrInvalidAnswer
	case RefusedNotHeld:
		e.sentinel = ErrNotHeld
	case RefusedNoPolicy:
		e.sentinel = ErrNoApprovalPolicy
	default:
		e.msg = fmt.Sprintf("approval answer refused (%s): %s", r.Reason, r.Error)
	}
	return e
}

// refusalError is the error of an [ApprovalRefusal].
type refusalError struct {
	msg      string
	sentinel error
}

func (e *refusalError) Error() string { return e.msg }
func (e *refusalError) Unwrap() error { return e.sentinel }

// refusal is the refusal of answer (as far as it was read) because of
// err, which wraps the sentinel of reason.
func refusal(answer ApprovalAnswer, reason string, err error) *ApprovalRefusal {
	return &ApprovalRefusal{ToolCallID: answer.ToolCallID, Decision: answer.Decision, Reason: reason, Error: err.Error()}
}

// Check reports whether the loop can apply a: it names a call and its
// Decision is one of DecisionApprove, DecisionDeny and DecisionEdit. The
// arguments of an edit are not checked here: arguments that are not JSON
// or fail validation are an answer, which denies the call.
func (a ApprovalAnswer) Check() error {
	switch {
	case a.ToolCallID == "":
		return fmt.Errorf("%w: no tool_call_id", ErrInvalidAnswer)
	case a.Decision != DecisionApprove && a.Decision != DecisionDeny && a.Decision != DecisionEdit:
		return fmt.Errorf("%w for %s: unknown decision %q (want %q, %q or %q)", ErrInvalidAnswer, a.ToolCallID, a.Decision,
			DecisionApprove, DecisionDeny, DecisionEdit)
	}
	return nil
}

// prepare checks the options and fills in the defaults.
func (o *ApprovalOptions) prepare() (*ApprovalOptions, error) {
	if o == nil {
		return nil, nil
	}
	opts := *o
	if opts.Deadline < 0 {
		return nil, fmt.Errorf("approval: negative deadline %v", opts.Deadline)
	}
	if opts.Policy == nil {
		opts.Policy = DefaultApprovalPolicy
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &opts, nil
}

// ReadApprovals returns the calls a stored session holds for approval, in
// the order they were held (for hosts that list what waits, between
// runs).
func ReadApprovals(store durability.Store, sessionID string) ([]ApprovalRequest, error) {
	rec, err := loadApprovalRecord(store, sessionID, 0)
	if err != nil {
		return nil, err
	}
	var out []ApprovalRequest
	for _, e := range rec.Held {
		if e.State == heldAsked {
			out = append(out, e.request())
		}
	}
	return out, nil
}
