package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"weak"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/supervisor"
	"github.com/polyweave/polyweave-go/telemetry"
	"github.com/polyweave/polyweave-go/tools"
)

// Defaults of [Options].
const (
	DefaultName                 = "agent"
	DefaultMaxAttempts          = 3
	DefaultMaxUncountedAttempts = 10
	DefaultCancelGrace          = 5 * time.Second
)

// HookGrace bounds how long [Agent.Close] waits for the
// ToolOptions.OnEvent hooks of delegations that hold all that is left
// of the agent's conversations to return, before it takes one of them
// for its caller (or for a hook that waits for Close to return) and
// returns an error wrapping [ErrCloseContinues]. A hook that returns
// within it (a quick one, such as one that streams text to a UI) lets
// Close go on waiting for the conversations as it would without it.
const HookGrace = 100 * time.Millisecond

// Errors returned by [Agent.Run] and [Agent.Stream].
var (
	// ErrSessionBusy: a conversation of that session is running already.
	ErrSessionBusy = errors.New("agent: session busy")
	// ErrClosed: the agent was closed.
	ErrClosed = errors.New("agent: closed")
	// ErrCloseContinues is wrapped by the error of an [Agent.Close] that
	// stopped waiting while conversations of the agent still waited for
	// tool calls' handlers running since before it began (or for
	// delegations' ToolOptions.OnEvent hooks that did not return within
	// [HookGrace]), one of which may be its caller: the
	// agent refuses new conversations, and finishes closing in the
	// background once they have returned. A handler or hook that closed
	// its own agent ignores it; a host that must see everything stopped
	// cancels its Runs, or calls Close again, which returns nil once the
	// close has completed, or waits for [Agent.Done].
	ErrCloseContinues = errors.New("agent: the close continues in the background")
	// ErrNoAnswer: the model still called tools when the iteration limit
	// was reached, so there is no final answer.
	ErrNoAnswer = errors.New("agent: no final answer within the iteration limit")
	// ErrNameTaken is returned by [New] for an agent with a Store when an
	// agent of the same name that uses the same Store is still open (not
	// closed): the two would read and write each other's sessions (see
	// [SessionKey]). Stores that wrap one store are that store when they
	// say so ([StoreWrapper]).
	ErrNameTaken = errors.New("agent: an open agent of that name uses the store")
	// ErrInvalidSessionID: the session id is empty, not valid UTF-8,
	// longer than [MaxSessionIDBytes], or, for an agent with a Store, ends
	// with tools.ApprovalStoreSuffix (its key would be the record of
	// another session's calls held for approval, see [SessionKey]).
	// Nothing was sent.
	ErrInvalidSessionID = errors.New("agent: invalid session id")
	// ErrNoAgent is returned by the methods of a nil or zero *Agent (one
	// not made by [New]).
	ErrNoAgent = errors.New("agent: nil or zero Agent; make one with New")
	// ErrNoMessages: the conversation has no message. Nothing was sent.
	ErrNoMessages = errors.New("agent: no messages")
	// ErrSessionConflict: with a Store, the session was started with other
	// messages (a session id names one conversation); sending them again
	// cannot help. Use a new session id for a new conversation.
	ErrSessionConflict = errors.New("agent: session was started with a different request; use a new session id for a new conversation")
	// ErrPermanent is the cause (FailedError.Err) of a conversation whose
	// model failed in a way that another attempt would meet again (the
	// adapter said so: models.FailurePermanent, e.g. a key refused, a
	// model that does not exist, a request rejected as malformed), or,
	// with a Store, whose store failed so (durability.IsPermanent: it
	// refuses the session's writes for good, its record of the session
	// is damaged, it was closed): Run gives up at once instead of making
	// MaxAttempts attempts. For a store's failure, FailedError.Err wraps
	// the store's error too (errors.Is(err, durability.ErrDamaged), say).
	ErrPermanent = errors.New("agent: permanent failure")
	// ErrLoopRestarting is the cause (FailedError.Err) of a conversation
	// whose loop kept restarting without having failed itself (a
	// supervisor's all-for-one restarts for other actors' failures):
	// [Options].MaxUncountedAttempts of its attempts were refused, or
	// closed before the loop served them, by those restarts.
	ErrLoopRestarting = errors.New("agent: the loop kept restarting for other actors' failures")
)

// MaxSessionIDBytes bounds the length of a session id in bytes: ids name
// streams and, with a Store, the store's records, whose keys stores
// limit. With a Store, an id must also leave its key ([SessionKey]: the
// agent's name, escaped, '/' and the id) and the key of its calls held
// for approval (the key and tools.ApprovalStoreSuffix) within
// durability.MaxNameLen bytes, the longest name every store of the
// module takes, so that a session stored in one store fits any other:
// an agent with a Store refuses a longer id with [ErrInvalidSessionID],
// saying the id's length, the name's and the longest id it takes.
const MaxSessionIDBytes = 1024

// FailedError is returned by [Agent.Run] and [Agent.Stream] when every
// attempt at the conversation failed (a stage crashed and its restart did
// not heal it, the model kept failing): Reason is the last attempt's
// ERROR text. When the last attempt failed because a conversation's loop
// of its own (with a Store, or delegated to) was stopped for good (a host
// stopped the runtime's subtree, a supervisor gave up), Err is
// actors.ErrDuplexStopped, so that errors.Is tells that case the same way
// whether it was seen by the last attempt or by the next one's start. A
// stop wins over the retries: a loop of its own stopped with no
// supervisor deciding so (its parent, the runtime's host or the Parent
// delegated to, is stopping) is not replaced, and the conversation fails
// at once, whatever attempts are left. A
// conversation on the agent's shared loop that finds it stopped or
// stopping for good makes no further attempt: it fails with an error
// wrapping actors.ErrDuplexStopped that names the agent and the session,
// not with a FailedError.
type FailedError struct {
	// Agent is the name of the agent ([Options].Name); Session is the
	// conversation's session id.
	Agent   string
	Session string
	// Attempts is the number of attempts counted against
	// [Options].MaxAttempts. It leaves out those in Uncounted: stream ids
	// ([StreamID]) and [Event].Attempt number every attempt sent, so the
	// last attempt's number is Attempts+Uncounted.
	Attempts int
	// Uncounted is the number of attempts sent but not counted in
	// Attempts: those that a restarting loop refused, or closed before
	// serving them, without having failed itself (see
	// [Options].MaxUncountedAttempts).
	Uncounted int
	// Reason is the last attempt's ERROR text.
	Reason string
	// Err is the cause when known, else nil: [ErrPermanent] (wrapping
	// the store's error too when the Store failed for good),
	// [ErrLoopRestarting] or actors.ErrDuplexStopped.
	Err error
}

// Error says how many attempts the conversation made, the last one's
// ERROR text and, when known, the cause.
func (e *FailedError) Error() string {
	msg := fmt.Sprintf("%s: session %q failed after %d attempt(s)", agentOf(e.Agent), clip(e.Session), e.Attempts)
	if e.Uncounted > 0 {
		msg += fmt.Sprintf(" and %d not counted", e.Uncounted)
	}
	msg += ": " + e.Reason
	if e.Err != nil {
		msg += fmt.Sprintf(" (%v)", e.Err)
	}
	return msg
}

// agentOf names the agent name in an error message: agent "name"
// (clipped), or agent alone for an error made without one.
func agentOf(name string) string {
	if name == "" {
		return "agent"
	}
	return fmt.Sprintf("agent %q", clip(name))
}

// clip shortens a name or a session id for an error message
// (tools.ClipID).
func clip(s string) string { return tools.ClipID(s) }

// checkSession returns an error wrapping ErrInvalidSessionID when id is
// not one a conversation can have.
func checkSession(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidSessionID)
	case len(id) > MaxSessionIDBytes:
		return fmt.Errorf("%w: %q is %d bytes long, more than %d", ErrInvalidSessionID, clip(id), len(id), MaxSessionIDBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidSessionID, clip(id))
	}
	return nil
}

// Unwrap returns the cause, if known.
func (e *FailedError) Unwrap() error { return e.Err }

// Options configure [New]. A nil *Options or a zero field means the
// default; options are copied.
type Options struct {
	// Name names the agent's tool loop actor; default [DefaultName]. Many
	// agents of one name run side by side (the runtime numbers them). Any
	// name will do: in the actor's name, '/' (which would make it a path
	// of the actor tree) is written "%2F" and '%' "%25", as in
	// [SessionKey], so the loop of an agent "team/a" is the actor
	// "team%2Fa".
	// With a Store it also keeps the agent's sessions apart from other
	// agents' in that store: they are stored under [SessionKey](Name,
	// session id), so a host must give the agent the same Name when it
	// starts again to resume them, and agents sharing a Store need names
	// of their own ([New] refuses a second open agent of one name on the
	// same Store value with [ErrNameTaken], seeing through wrappers that
	// say what they wrap, [StoreWrapper]; agents of other processes it
	// cannot see). A session's keys hold the Name, so with a Store it
	// must leave room for a session id: [New] refuses, with an error
	// wrapping durability.ErrInvalidName, a Name so long that the key of
	// the calls held for approval of a session whose id is one byte
	// ("<name>/<session id>" and tools.ApprovalStoreSuffix, the name
	// written as [SessionKey] writes it) would pass
	// durability.MaxNameLen; the longer the Name, the shorter the session
	// ids it takes (see [MaxSessionIDBytes]).
	Name string
	// Tools are the tools the agent may call (see also [AsTool]).
	Tools []*tools.Tool
	// SystemPrompt, when set, is put in front of every conversation.
	SystemPrompt string
	// ToolChoice, when set, is sent as the "tool_choice" PARAM.
	ToolChoice json.RawMessage
	// MaxIterations is the number of tool rounds after which the model is
	// told to answer without tools; default tools.DefaultMaxIterations.
	MaxIterations int
	// FinalPrompt is the system message that tells it so; default
	// tools.DefaultFinalSystemPrompt.
	FinalPrompt string
	// Store, when set, makes every session durable: the conversation is
	// persisted at each step under its session id, an attempt that failed
	// is resumed from the store (completed tool calls are not run again),
	// and a Run with the same session id and messages in a later process
	// resumes it (also after a Run whose ctx was cancelled: its cancelled
	// calls keep their results), or answers from the store when it had
	// ended; either way the answer holds the rounds done before, rebuilt
	// from the store (see [Agent.Run]). A
	// session id names one conversation: a Run with other messages under
	// an id already used fails. Sessions are stored under [SessionKey] of
	// the agent's Name and the session id (see Name). The caller owns and
	// closes the store.
	Store durability.Store
	// MaxAttempts bounds the attempts of one Run, the first included:
	// when an attempt ends with ERROR (a supervised restart, a model
	// failure), the conversation is resumed from the store (with Store)
	// or sent again with the rounds that completed (without). An attempt
	// after one that a conversation's own loop closed or refused as
	// stopped runs on a fresh loop, once the old one has stopped (see the
	// package doc). An attempt after one that failed without a failure
	// kind waits while the loop restarts, and one that a restarting loop
	// refused (or closed before serving it) without having failed itself
	// is not counted (see MaxUncountedAttempts). Default
	// [DefaultMaxAttempts]; 1 never retries.
	MaxAttempts int
	// MaxUncountedAttempts bounds the attempts of one Run not counted
	// against MaxAttempts: those that a restarting loop refused, or closed
	// before serving them, without having failed itself (a supervisor's
	// all-for-one restart for another actor's failure). A supervisor's
	// intensity bounds restarts per window of time, not in all: a sibling
	// that keeps failing, slower than that, would otherwise keep a Run
	// going for as long as it fails. When that many attempts were not
	// counted, the Run fails with a *[FailedError] whose Err is
	// [ErrLoopRestarting]. Default [DefaultMaxUncountedAttempts].
	MaxUncountedAttempts int
	// CancelGrace bounds how long a cancelled Run waits for the loop to
	// end the conversation after sending ABORT (the loop ends it once the
	// model adapter has answered the ABORT, see [Agent.Run]); default
	// [DefaultCancelGrace]. Past it the Run returns and, on the agent's
	// shared loop, the agent waits for the rest in the background, the
	// session taken meanwhile (see [Agent.Run]); a conversation on a loop
	// of its own (with a Store, or delegated to within one runtime) has
	// that loop stopped instead, for CancelGrace at most. [Agent.Close]
	// waits as long for what may have called it: a consumer's body, a
	// tool's handler. That clean-up, and the delete of a delegation's
	// session from the Store, runs on a ctx with the Run ctx's values (a
	// trace parent, what a Store reads), not its cancel.
	CancelGrace time.Duration
	// Breaker configures the tools' circuit breaker; Supervision
	// supervises the model and the tool actors (nil: the runtime's).
	Breaker     tools.BreakerOptions
	Supervision *supervisor.Strategy
	// OnToolResult, when set, is called on the loop actor's goroutine once
	// per tool result (see tools.LoopOptions.OnToolResult): quick and
	// non-blocking.
	OnToolResult func(tools.ToolResultEvent)
	// Approval, when set, holds back the calls its policy asks about until
	// a person answers: Run returns a *[WaitingError] and [Agent.Resume]
	// gives the answers (see tools.ApprovalOptions; package approval has
	// policies).
	Approval *tools.ApprovalOptions
	// Telemetry, when set, traces and measures the agent: its tool loop is
	// tapped (telemetry.Telemetry.AgentConversations: a span per run and
	// per tool call), its breakers report their state (as well as to
	// Breaker.OnChange, when set) and Store's calls are measured. Tap the model adapter with
	// Telemetry.Model to see its requests as spans of the runs. Each
	// attempt of a session runs on a stream of its own (see [StreamID]);
	// a run span's gen_ai.conversation.id is its session id all the same
	// ([SessionOf]), the same for every attempt, the conversation's id by
	// the GenAI conventions, unless the Telemetry was made with
	// telemetry.Options.ConversationID: the host's mapping wins. Other
	// loops the Telemetry taps (telemetry.Telemetry.Agent) keep their
	// stream ids.
	Telemetry *telemetry.Telemetry
}

// Agent runs tool conversations with a model: a tool loop around a model
// adapter, started in a runtime. Its methods are safe for concurrent use;
// conversations of different sessions run concurrently.
type Agent struct {
	rt    *actors.Runtime
	model actors.Spec
	opts  Options
	loop  tools.LoopOptions
	spec  actors.Spec // the shared loop's spec (traced); unused with a Store
	// startShared starts the shared loop: the runtime's StartMux (tests
	// put a failing start in front of it).
	startShared func(actors.Spec) (*actors.Mux, error)

	// delegationTag and delegations name the sessions of AsTool calls: a
	// random tag per Agent value (ending with "-"), so that a delegation
	// never takes a session id the host uses with the agent, and, with a
	// Store, a host started again (a new process, a new Agent on the same
	// Store) never names a delegation after one an earlier Agent stored;
	// then a counter.
	delegationTag string
	delegations   atomic.Uint64

	mu sync.Mutex
	// shared is the start of the shared loop (never with a Store): nil
	// until a conversation first needs it, then the start under way or
	// done. A start that failed is replaced by the next one needing it.
	shared *loopStart
	// ready is the shared loop once a start of it succeeded (it is kept
	// for good): enter hands it to a conversation under the lock it takes
	// anyway.
	ready *actors.Mux
	// self points at the agent without keeping it (see loopOwners).
	self weak.Pointer[Agent]
	// The sessions running: the first in busyOne, more in busy (an agent
	// that runs one session at a time keeps no map).
	busyOne string
	busy    map[string]bool
	waiting map[string]*waitingStream // without a Store: the sessions waiting for approval
	// draining: the sessions whose cancelled conversation the shared loop
	// still winds down past CancelGrace (see drain); each channel is
	// closed when its drain is over. Such a session is taken: enter waits
	// for the channel.
	draining map[string]chan struct{}
	// stopping: the sessions whose last Run returned while its own loop
	// was still stopping (see conversation.awaitEarlier), with that loop;
	// entries of loops that have stopped meanwhile are dropped as others
	// are added. Close waits for those left before it gives the name
	// back, and then drops them.
	stopping map[string]*actors.Mux
	// ownLoops are the loops of their own that the conversations running
	// use (with a Store, or delegated to): with ready, the loops whose
	// tool calls Close tells from a host's (see insideOwnLoop).
	ownLoops map[*actors.Mux]struct{}
	// delegating counts the handlers of delegations (AsTool) that tool
	// actors under the agent's loops run (see callersOf); delegated, when
	// a Close waits for them, is closed (and cleared) as the last returns.
	delegating int
	delegated  chan struct{}
	// calls holds the handlers of the tool calls the agent's loops run
	// that have not returned (see callTable and trackCalls).
	calls *callTable
	// hooks are the ToolOptions.OnEvent hooks of the delegations that
	// its conversations made, directly or within one they made, whose
	// handlers have not returned (see AsTool): a Close waits for those
	// running for HookGrace at most (see awaitConversations). Those of
	// delegations made to the agent are their conversations' consumers
	// (closer.inBody).
	hooks map[*hookSlot]struct{}
	// closeDone is set once a Close has returned nil: a later Close
	// returns nil at once, not waiting again for the conversations that
	// one cancelled in their consumer's body and left.
	closeDone bool
	// done, made by the first Done, is closed as closeDone is set.
	done   chan struct{}
	closed bool
	// closingLater: a closeLater is finishing the close in the
	// background.
	closingLater bool
	// closing is closed by the first Close, for the Runs waiting for a
	// drain (see enter), or for a loop to restart or stop (see
	// untilClosed); made by the first of them.
	closing chan struct{}
	// active counts what entered and has not left (see enter): Runs,
	// Streams, Resumes, Discards, migrations; convs are the closers of
	// those among them that Close may cancel (delegations, and those
	// with a consumer). changed, when a Close waits for them, is
	// closed (and cleared) as one leaves or enters a consumer's body (see
	// closer.inBody); closeWaits says a Close may wait.
	active     int
	convs      map[*closer]struct{}
	changed    chan struct{}
	closeWaits atomic.Bool
	// leftInBody: a Close did its work while conversations it did not
	// wait for (their consumer's body was running, see Close) had not
	// returned: the last of them to leave gives the name back.
	leftInBody bool
	drains     sync.WaitGroup // the drain goroutines
	// claim is the agent's hold of its name on its Store (see
	// claimName), given back by the first Close that completes; nil when
	// there is none.
	claim *storeClaim
	// claimStore is the store New was given, through its wrappers (see
	// StoreWrapper), on which names are claimed (opts.Store is the Store
	// given, measured with Telemetry): claims of other agents are looked
	// up on it (see keyOwner).
	claimStore durability.Store
	// encoded is the last list of messages a Run encoded, for the next
	// Runs that send the same.
	encoded encodeCache
}

// loopStart is one start of an agent's shared loop: done is closed once
// it has returned mux or err, which are read only after done.
type loopStart struct {
	done chan struct{}
	mux  *actors.Mux
	err  error
}

// New builds an agent on rt around the model adapter model (a duplex
// speaking the contract of package models). New starts no actor. Without
// a Store the agent's tool loop is started by the first conversation that
// needs it (a Run, Stream or Resume, or a delegation from an agent of
// another runtime) and then serves every session; with a Store, each of
// them starts a loop for its session. A delegation through [AsTool] from
// an agent of the same runtime runs on a loop of its own, so an agent used
// only as a tool never starts the shared one.
//
// A durable agent needs no loop before a Run either: a session is resumed
// by the Run or Resume that names it (nothing else finds it in the store),
// and it then starts the session's loop.
func New(rt *actors.Runtime, model actors.Spec, o *Options) (*Agent, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	switch {
	case rt == nil:
		return nil, errors.New("agent: nil runtime")
	case model.New == nil:
		return nil, errors.New("agent: model spec has no New function")
	case opts.MaxAttempts < 0:
		return nil, fmt.Errorf("agent: negative MaxAttempts %d", opts.MaxAttempts)
	case opts.MaxUncountedAttempts < 0:
		return nil, fmt.Errorf("agent: negative MaxUncountedAttempts %d", opts.MaxUncountedAttempts)
	case opts.CancelGrace < 0:
		return nil, fmt.Errorf("agent: negative CancelGrace %v", opts.CancelGrace)
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.MaxUncountedAttempts == 0 {
		opts.MaxUncountedAttempts = DefaultMaxUncountedAttempts
	}
	if opts.CancelGrace == 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	opts.Tools = append([]*tools.Tool(nil), opts.Tools...)
	if opts.Store != nil {
		if err := nameFits(opts.Name); err != nil {
			return nil, err
		}
	}
	claimStore := innermost(opts.Store)
	claim, err := claimName(claimStore, opts.Name)
	if err != nil {
		return nil, err
	}
	if t := opts.Telemetry; t != nil {
		if own := opts.Breaker.OnChange; own != nil {
			opts.Breaker.OnChange = func(tool string, state tools.BreakerState) {
				t.BreakerChanged(tool, state)
				own(tool, state)
			}
		} else {
			opts.Breaker.OnChange = t.BreakerChanged
		}
		if opts.Store != nil {
			opts.Store = t.Store(opts.Store)
		}
	}
	a := &Agent{rt: rt, model: model, opts: opts, startShared: rt.StartMux, claim: claim, claimStore: claimStore}
	a.delegationTag = rand.Text()[:10] + "-"
	a.self, a.calls = weak.Make(a), newCallTable()
	a.loop = tools.LoopOptions{
		RouterOptions: tools.RouterOptions{Name: opts.Name, Tools: opts.Tools, Breaker: opts.Breaker,
			Supervision: opts.Supervision, OnCall: trackCalls(a.self, a.calls)},
		ToolChoice:        opts.ToolChoice,
		SystemPrompt:      opts.SystemPrompt,
		MaxIterations:     opts.MaxIterations,
		FinalSystemPrompt: opts.FinalPrompt,
		OnToolResult:      opts.OnToolResult,
		Approval:          opts.Approval,
	}
	spec, err := tools.NewLoop(model, &a.loop) // validates the options
	if err != nil {
		claim.release()
		return nil, fmt.Errorf("agent %q: %w", clip(opts.Name), err)
	}
	a.spec = a.traced(spec)
	runtime.AddCleanup(a, forgetLoopsOf, a.self)
	return a, nil
}

// sharedLoop returns the agent's shared loop, starting it when no
// conversation has yet. Callers that come while a start is under way wait
// for it and share its result, an error included; after a start that
// failed, the next caller tries again. A loop started is kept, also once
// it has stopped for good (its supervisor gave up): conversations on it
// then fail with actors.ErrDuplexStopped. A caller whose ctx ends while it
// waits returns ctx's error (a start done wins over an ended ctx). Only conversations that entered (see enter)
// call it, so that Close, which waits for them, sees every loop started.
func (a *Agent) sharedLoop(ctx context.Context) (*actors.Mux, error) {
	a.mu.Lock()
	s := a.shared
	if s != nil && s.failed() {
		s = nil
	}
	starter := s == nil
	if starter {
		s = &loopStart{done: make(chan struct{})}
		a.shared = s
	}
	a.mu.Unlock()
	if starter {
		s.mux, s.err = a.startShared(a.spec)
		if s.err != nil {
			s.err = fmt.Errorf("agent %q: start its loop: %w", clip(a.opts.Name), s.err)
		} else {
			a.mu.Lock()
			a.ready = s.mux
			a.mu.Unlock()
			a.ownLoop(s.mux)
		}
		close(s.done)
	}
	select {
	case <-s.done: // a start that is done wins over a ctx that ended too
		return s.mux, s.err
	default:
	}
	select {
	case <-s.done:
		return s.mux, s.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// failed reports whether s is done and failed.
func (s *loopStart) failed() bool {
	select {
	case <-s.done:
		return s.err != nil
	default:
		return false
	}
}

// Name is the agent's name ("" for a nil or zero Agent).
func (a *Agent) Name() string {
	if a == nil {
		return ""
	}
	return a.opts.Name
}

// usable returns ErrNoAgent for a nil Agent or one not made by New.
func (a *Agent) usable() error {
	if a == nil || a.rt == nil {
		return ErrNoAgent
	}
	return nil
}

// traced taps the loop spec with Options.Telemetry, if any, its runs'
// gen_ai.conversation.id being their session's (sessionID), and names its
// actor after the agent's name escaped as in [SessionKey] ('/' as "%2F",
// '%' as "%25"): a name is one element of the actor tree's paths, so that
// the loop of an agent "team/model" is no path of the loop of an agent
// "team" (it would take its model child's place). Telemetry sees the
// name as given.
func (a *Agent) traced(loop actors.Spec) actors.Spec {
	if a.opts.Telemetry != nil {
		loop = a.opts.Telemetry.AgentConversations(loop, sessionID)
	}
	loop.Name = keyEscaper.Replace(loop.Name)
	return loop
}

// sessionID is the session of an attempt's stream id ([SessionOf]).
func sessionID(stream string) string {
	session, _ := SessionOf(stream)
	return session
}

// Close stops the agent's loop, if a conversation started it, once the
// conversations running have returned (cancel their contexts to make them
// return early); an agent whose loop never started has nothing to stop.
// Two kinds of conversation it does not wait for that way. Delegations
// to the agent ([AsTool]), whose ctx is another agent's tool call, not a
// host's, are cancelled as Close begins, with ErrClosed as the cause
// (their calls fail with an error saying the agent was closed), and
// waited for as they wind down (CancelGrace bounds that, see
// [Agent.Run]). And those whose consumer (a [Agent.Stream] loop body, a
// ToolOptions.OnEvent hook) stays in the body of one event, such as the
// Stream whose loop body called Close: once every other conversation
// has returned and each of those has stayed in the same event's body
// for CancelGrace (a consumer entering its next event's body, or a
// conversation returning, starts that grace anew), they are cancelled
// with ErrClosed and not waited for: Close goes on and returns, and each
// ends with an error wrapping ErrClosed once its consumer returns to it.
// Close cannot tell a body that called it from one running on another
// goroutine, so a consumer on another goroutine that handles one event
// for longer than CancelGrace while nothing else is left for Close to
// wait for is cancelled too; one that returns to its Stream sooner is
// waited for. The agent's name on its Store is then given
// back once the last of them has returned and its loop has stopped.
// Run and Stream then fail with [ErrClosed], as do, as soon as Close
// begins, those waiting for the loop to end a cancelled conversation of
// their session (see [Agent.Run]): stopping the loop ends those
// conversations, and Close waits for the agent's readers of them to see
// it, not for their tools to wind down. So do those waiting for their
// loop to restart, or for a loop of their own, or of their session's
// last Run, to stop (see the package doc): Close waits for them to
// return. It then waits until the shared loop has stopped, its children
// included, and so have the loops of the agent's own conversations
// (with a Store, or delegated to) that were still stopping when their
// Run returned: a loop of a durable session persists it until it is
// gone. Then, for CancelGrace at most, it waits for the handlers of the
// delegations its conversations made ([AsTool] of other agents), which
// wind down as their loops, under the agent's, stop: a host's
// ToolOptions.OnEvent hook gets no event of them after Close returned,
// unless it held one for longer. Only then does it give the agent's name on its Store back (see
// [ErrNameTaken]), so that an agent of that name started after it never
// runs a session beside a loop of this one.
//
// A tool call of one of the agent's conversations (its handler, or a
// conversation delegated to under it) that closes the agent with its
// call's ctx, or a ctx made from it, is waited for by that conversation,
// so Close cannot wait for it: Close then refuses new conversations and
// cancels the delegations to the agent as above, returns nil at once,
// and does the rest in the background once the running conversations,
// that one included, have returned (a Close from outside meanwhile waits
// as above). A Close given another ctx (context.Background, say) cannot
// tell its caller from a host by it: Go names no goroutine to a function
// it calls, and reading goroutine ids from stack traces would cost every
// call what only a Close needs. Close knows instead, through the agent's
// tool loops (tools.RouterOptions.OnCall), which conversations wait for
// a handler of their calls, and which handlers were running when it
// began: once every conversation left waits for such handlers (or is in
// its consumer's body, as above), one of them running since before
// Close began, and none began or returned for CancelGrace, one of those
// handlers may be its caller. Close then stops waiting: it returns an
// error wrapping [ErrCloseContinues] that says how many conversations
// and handlers still run, and the agent, refusing new conversations,
// finishes closing in the background once they have returned. While
// ToolOptions.OnEvent hooks of the delegations the agent made, directly
// or within one it made, run as well (the agent keeps the hooks of those
// delegations; how deep in a hook Close is called does not matter), a
// hook may be its caller instead: Close waits for those hooks to return,
// for [HookGrace] at most. Once they have, none of them called it, and
// it waits on as above (a hook that returns quickly at each event, such
// as one that streams text to a UI, does not end the wait); if one has
// not, it stops waiting then. A delegation made to the agent, cancelled
// as Close began, whose conversation is left in its hook, is waited for
// HookGrace at most, and then no longer (Close returns nil, as for a
// consumer's body above); so are the handlers of the delegations the
// agent made that, once its loops have stopped, are all left in their
// hooks (the hook of a delegation whose call was cancelled, say, which
// closes the agent). So a
// tool's handler, or a goroutine a handler or hook waits for, closing
// the agent with another ctx holds its conversation for CancelGrace
// (its call's ctx saves that wait; a ctx of Close's that ends sooner
// fails it with an error saying how many conversations still ran and
// that a tool call gives Close its call's ctx), and gets
// ErrCloseContinues, which it ignores; and a host's Close during a call
// whose handler was running before it and runs for longer than
// CancelGrace, all that is left to wait for, gets ErrCloseContinues
// before that handler has returned, and so does a host's Close on
// another goroutine while a hook holds all that is left and runs for
// longer than HookGrace, a slow hook or one that waits for Close to
// return (cancel the Runs first for a Close that returns nil once
// everything has stopped). A later Close does as the first: it waits, and returns nil
// once the close has completed, or ErrCloseContinues again while such a
// handler still runs.
// Sessions waiting for approval without a Store are dropped: the loop,
// stopping, answers their held calls, and Resume fails with ErrClosed. A
// Close whose ctx ends first returns an error wrapping ctx's, the name
// still taken, and a later Close finishes the work, waiting for what is
// still stopping; once one has returned nil, later calls return nil at
// once (they do not wait again for the conversations it cancelled in
// their consumer's body).
func (a *Agent) Close(ctx context.Context) error {
	if err := a.usable(); err != nil {
		return err
	}
	if a.insideOwnLoop(ctx) {
		// A tool call of a conversation of the agent: that conversation
		// waits for the call, which waits for Close. Refuse new
		// conversations now, and finish once the running ones returned.
		a.mu.Lock()
		a.beginCloseLocked()
		a.mu.Unlock()
		a.closeLater("begun by a tool call of the agent")
		return nil
	}
	return a.close(ctx, true)
}

// Done returns a channel that is closed once the agent's close has
// completed, as a Close that returns nil says: at once after such a
// Close, and, after one that returned an error wrapping
// [ErrCloseContinues], once the agent has finished closing in the
// background (a Close then returns nil at once). A tool call's Close
// with its call's ctx returns nil before the close has completed (its
// conversation waits for the call): Done is closed once the agent has
// finished closing in the background. It is not closed before a Close
// begins, nor by a Close whose ctx ended first (a later Close finishes
// the work). A nil or zero Agent's is nil.
func (a *Agent) Done() <-chan struct{} {
	if a.usable() != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done == nil {
		a.done = make(chan struct{})
		if a.closeDone {
			close(a.done)
		}
	}
	return a.done
}

// closeLater finishes closing the agent on a goroutine of its own, once
// the conversations running have returned, and logs an error (why says
// who began the close).
// One runs at a time: a Close begun meanwhile leaves it to that one.
func (a *Agent) closeLater(why string) {
	a.mu.Lock()
	running := a.closingLater
	a.closingLater = true
	a.mu.Unlock()
	if running {
		return
	}
	go func() {
		err := a.close(context.Background(), false)
		a.mu.Lock()
		a.closingLater = false
		a.mu.Unlock()
		if err != nil {
			a.rt.Logger().Warn("agent: close, "+why, slog.String("agent", a.opts.Name), slog.Any("error", err))
		}
	}()
}

// close is Close once its ctx was not known for a tool call's. Its
// caller may still be a handler of the agent's calls, given another ctx:
// with byCaller, the conversations left waiting for handlers that were
// running when close began are waited for CancelGrace only (see
// awaitConversations); a close on a goroutine of the agent's own
// (closeLater) waits for them.
func (a *Agent) close(ctx context.Context, byCaller bool) error {
	a.closeWaits.Store(true) // before the first look at who is in a body
	a.mu.Lock()
	if a.closeDone {
		a.mu.Unlock()
		return nil
	}
	a.beginCloseLocked()
	var before uint64 // the handlers that may have called close: those numbered up to it
	if byCaller {
		a.calls.watched.Store(true) // before the first look at the handlers
		before = a.calls.seq.Load()
	}
	held, err := a.awaitConversations(ctx, before, byCaller)
	if err != nil {
		n := a.active
		a.mu.Unlock()
		return fmt.Errorf("agent %q: close: wait for its conversations (%d conversation(s) still running; "+
			"a tool call of one that closes the agent gives Close its call's ctx, else Close waits for it for CancelGrace): %w",
			clip(a.opts.Name), n, err)
	}
	if held {
		// What is left waits for handlers that ran before this Close
		// began, one of which may have called it: finish once they have
		// returned, and say so.
		n, h := a.active, len(a.calls.running(nil))
		a.mu.Unlock()
		a.closeLater("its conversations held by tool calls")
		return fmt.Errorf("agent %q: close: %d conversation(s) still running, waiting for tool calls' handlers "+
			"(%d running) that began before Close, one of which may have called it; the agent refuses new "+
			"conversations and finishes closing once they have returned: %w", clip(a.opts.Name), n, h, ErrCloseContinues)
	}
	// Every conversation has returned, but for those cancelled in their
	// consumer's body, and no other can enter: a start of the shared
	// loop, made only by one of them, is done (those cancelled start
	// none), and no session starts waiting (see waitingFor). A session
	// stops waiting, or leaves a loop stopping, only as one of those
	// cancelled returns: the last of them gives the name back, once
	// that loop has stopped (see leave).
	s, waiting := a.shared, a.waiting
	a.waiting = nil
	stopping := make([]*actors.Mux, 0, len(a.stopping))
	for _, m := range a.stopping {
		stopping = append(stopping, m)
	}
	a.mu.Unlock()
	if s != nil && s.mux != nil {
		// Mux.Close waits as long as ctx for the loop to be gone, also
		// after a Close before whose ctx ended.
		err = s.mux.Close(ctx)
	}
	for _, ws := range waiting {
		ws.s.Close()
	}
	if err != nil {
		return fmt.Errorf("agent %q: close: stop its loop: %w", clip(a.opts.Name), err)
	}
	// The loops of its own conversations were stopped by their Runs
	// (or by their supervisors): Close stops nothing more, and waits.
	for _, m := range stopping {
		if err := m.Close(ctx); err != nil {
			return fmt.Errorf("agent %q: close: wait for a loop of its own to stop: %w", clip(a.opts.Name), err)
		}
	}
	a.mu.Lock()
	for id, m := range a.stopping {
		if m.Stopped() { // those waited for
			delete(a.stopping, id)
		}
	}
	a.mu.Unlock()
	if s != nil {
		a.disownLoop(s.mux)
	}
	if err := a.awaitDelegating(ctx); err != nil {
		return fmt.Errorf("agent %q: close: wait for the delegations it made to return: %w", clip(a.opts.Name), err)
	}
	// The loop has stopped: the drains read to its end and return.
	drained := make(chan struct{})
	go func() { a.drains.Wait(); close(drained) }()
	select {
	case <-drained:
		a.mu.Lock()
		if a.active > 0 {
			a.leftInBody = true // the last to leave gives the name back
		} else {
			// Nothing of the agent runs any more, but for the loops left
			// stopping by conversations that Close cancelled in their
			// consumer's body, if any.
			a.releaseAfter(a.stopping)
			a.stopping = nil
		}
		if !a.closeDone {
			a.closeDone = true
			if a.done != nil {
				close(a.done)
			}
		}
		a.mu.Unlock()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent %q: close: wait for its drains: %w", clip(a.opts.Name), ctx.Err())
	}
}

// loopOwners maps every loop an agent runs (its shared loop once
// started, until Close; the loop of its own of a conversation running),
// by its runtime and actor id, to that agent: the handler of a delegation
// (AsTool) run by a tool actor under one of them finds the agent that
// called it, and those above that one (callersOf), whose Close waits for it. It holds runtimes and
// agents weakly: a host that closes a runtime without closing its agents
// and drops them gets them back (their entries go with them, see
// forgetLoopsOf); loops of two runtimes may have the same id.
var loopOwners = struct {
	sync.Mutex
	of map[loopKey]weak.Pointer[Agent]
}{of: map[loopKey]weak.Pointer[Agent]{}}

// loopKey names a loop: its runtime and its actor id.
type loopKey struct {
	rt weak.Pointer[actors.Runtime]
	id string
}

// ownLoop notes that m is a loop of a; a nil m does nothing.
func (a *Agent) ownLoop(m *actors.Mux) {
	if m == nil {
		return
	}
	k := loopKey{weak.Make(a.rt), m.Ref().String()}
	loopOwners.Lock()
	loopOwners.of[k] = a.self
	loopOwners.Unlock()
}

// disownLoop notes that m is no longer a loop of a; a nil m does
// nothing.
func (a *Agent) disownLoop(m *actors.Mux) {
	if m == nil {
		return
	}
	k := loopKey{weak.Make(a.rt), m.Ref().String()}
	loopOwners.Lock()
	if loopOwners.of[k] == a.self {
		delete(loopOwners.of, k)
	}
	loopOwners.Unlock()
}

// forgetLoopsOf drops the loops of an agent no longer reachable (the
// cleanup New attaches to each agent).
func forgetLoopsOf(self weak.Pointer[Agent]) {
	loopOwners.Lock()
	defer loopOwners.Unlock()
	for k, a := range loopOwners.of {
		if a == self {
			delete(loopOwners.of, k)
		}
	}
}

// loopOwner returns the agent whose loop on rt has actor id id, or nil.
// The caller holds loopOwners.
func loopOwner(rt *actors.Runtime, id string) *Agent {
	return loopOwners.of[loopKey{weak.Make(rt), id}].Value()
}

// callersOf returns the agents whose loops the actor p is under, each
// once, the nearest first: for a delegation within a delegation, the
// agent that delegated, then the one that delegated to it, and so on;
// each of their conversations waits for p's work.
func callersOf(p actors.Parent) []*Agent {
	id, rt := p.Ref().String(), p.Runtime()
	loopOwners.Lock()
	defer loopOwners.Unlock()
	var out []*Agent
	for i := len(id) - 1; i > 0; i-- {
		if id[i] == '/' {
			if a := loopOwner(rt, id[:i]); a != nil && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// delegate counts a delegation's handler, run for a conversation of a,
// and keeps its OnEvent hook, when it has one (see Agent.hooks), until
// the function it returns is called.
func (a *Agent) delegate(hook *hookSlot) (done func()) {
	a.mu.Lock()
	a.delegating++
	if hook != nil {
		if a.hooks == nil {
			a.hooks = make(map[*hookSlot]struct{})
		}
		a.hooks[hook] = struct{}{}
	}
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.hooks, hook)
		if a.delegating--; a.delegating == 0 && a.delegated != nil {
			close(a.delegated)
			a.delegated = nil
		}
		a.mu.Unlock()
	}
}

// hooksRunningLocked returns the hooks of the agent's delegations (see
// Agent.hooks) that are running, each with its entry (hookSlot.n), but
// for those whose call has ended, which hold nothing (hookSlot.holds);
// a.mu is held.
func (a *Agent) hooksRunningLocked() map[*hookSlot]uint64 {
	var out map[*hookSlot]uint64
	for h := range a.hooks {
		if n := h.n.Load(); n%2 == 1 && h.holds() {
			if out == nil {
				out = make(map[*hookSlot]uint64)
			}
			out[h] = n
		}
	}
	return out
}

// stillIn tells whether one of the hooks in running is still in the same
// entry (it has not returned since) and holds its callers' conversations
// (its call has not ended meanwhile).
func stillIn(running map[*hookSlot]uint64) bool {
	for h, n := range running {
		if h.n.Load() == n && h.holds() {
			return true
		}
	}
	return false
}

// awaitDelegating waits, once the agent's loops have stopped (and with
// them the loops of the delegations they made), until the handlers of
// those delegations have returned, for CancelGrace at most: a host's
// ToolOptions.OnEvent hook still running in one may hold it no longer.
// Once every handler left is in its hook, each in the same entry (see
// hookSlot), it waits HookGrace at most: nothing is left for them to do
// but return from their hooks, one of which may be its caller. It
// returns ctx's error if ctx ends first.
func (a *Agent) awaitDelegating(ctx context.Context) error {
	grace := time.NewTimer(a.opts.CancelGrace)
	defer grace.Stop()
	var (
		inHooks    map[*hookSlot]uint64 // those in their hooks, with their entries, as hooksGrace runs
		hooksGrace *time.Timer
		hooksC     <-chan time.Time
	)
	defer func() {
		if hooksGrace != nil {
			hooksGrace.Stop()
		}
	}()
	for {
		a.mu.Lock()
		if a.delegating == 0 {
			a.mu.Unlock()
			return nil
		}
		if a.delegated == nil {
			a.delegated = make(chan struct{})
		}
		delegated := a.delegated
		if now := a.delegationsInHooksLocked(); now == nil {
			inHooks, hooksC = nil, nil
		} else if inHooks == nil || !sameEntries(inHooks, now) {
			inHooks = now // the grace starts (anew)
			if hooksGrace == nil {
				hooksGrace = time.NewTimer(HookGrace)
			} else {
				hooksGrace.Reset(HookGrace)
			}
			hooksC = hooksGrace.C
		}
		a.mu.Unlock()
		select {
		case <-delegated:
		case <-grace.C:
			return nil
		case <-hooksC:
			a.mu.Lock()
			now := a.delegationsInHooksLocked()
			a.mu.Unlock()
			if now != nil && sameEntries(inHooks, now) {
				return nil // in the same entry of their hooks for HookGrace
			}
			inHooks, hooksC = nil, nil // something moved: look again
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// delegationsInHooksLocked returns the hooks of the delegations the
// agent made (see Agent.hooks) with their entries when every handler
// of those that have not returned (Agent.delegating) runs its hook, else
// nil; a.mu is held.
func (a *Agent) delegationsInHooksLocked() map[*hookSlot]uint64 {
	running := make(map[*hookSlot]uint64, len(a.hooks))
	for h := range a.hooks {
		if n := h.n.Load(); n%2 == 1 {
			running[h] = n
		}
	}
	if len(running) == 0 || len(running) < a.delegating {
		return nil
	}
	return running
}

// beginCloseLocked marks the agent closed, so that no conversation
// enters any more, ends the waits of those that Close must end, and
// cancels the delegations to the agent, which no host can cancel; a.mu
// is held.
func (a *Agent) beginCloseLocked() {
	if !a.closed && a.closing != nil {
		close(a.closing) // the Runs waiting for a drain, a restart or a stop fail now
	}
	a.closed = true
	for c := range a.convs {
		if c.delegation {
			c.cancel(ErrClosed) // no host can cancel it
		}
	}
}

// insideOwnLoop reports whether ctx is that of work an actor under one of
// the agent's loops started (a tool call's handler, a delegation's
// conversation under it): the agent's shared loop, or a loop of its own
// of a conversation running. A Close there is waited for by one of the
// agent's conversations, and cannot wait for it.
func (a *Agent) insideOwnLoop(ctx context.Context) bool {
	p, ok := actors.ParentFrom(ctx)
	if !ok || p.Runtime() != a.rt {
		return false
	}
	id := p.Ref().String()
	under := func(m *actors.Mux) bool {
		loop := m.Ref().String()
		return len(id) > len(loop) && id[len(loop)] == '/' && id[:len(loop)] == loop
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ready != nil && under(a.ready) {
		return true
	}
	for m := range a.ownLoops {
		if under(m) {
			return true
		}
	}
	return false
}

// awaitConversations waits, a.mu held (released while it waits), until
// every conversation that entered has returned, or until the only ones
// left are in their consumer's body (a Stream's loop body, an OnEvent
// hook) and have stayed in the same entry of it for CancelGrace: those
// it cancels with ErrClosed and no longer waits for. Go tells no
// goroutine from another: a body that called Close never leaves, while
// a consumer on another goroutine returns to its conversation, which
// either returns or enters the body again with its next event; each
// change of who is in which entry starts the grace anew.
//
// With before, the number of the last handler of the agent's calls that
// began before Close (see callTable; 0: none of them called Close),
// it also stops waiting once every conversation left is in its
// consumer's body or waits for a handler, one of them a handler that
// began before Close, and nothing of that changed for CancelGrace: it
// then returns held, and leaves those conversations alone. Such a
// handler may be the caller of Close, which holds the conversations
// waiting for it (a handler given context.Background rather than its
// call's ctx, or a hook of a delegation, which gets none); one that is
// not returns to its conversation, which then either returns or has a
// handler begin or end, and the grace starts anew. With byCaller (a
// Close that may have been called by such a handler, or by a hook), a
// delegation's hook running then (see Agent.hooks) may be the caller:
// it waits for the hooks running to return (each to leave the entry it
// was in, see hookSlot), for HookGrace at most, and then returns held
// if they have not, and waits on as before if they have (a hook that
// begins as it waits wakes it, see hookSlot.enter); the grace of
// delegations to the agent left in their hooks, their bodies, is
// HookGrace too. It returns ctx's error when ctx ends first.
func (a *Agent) awaitConversations(ctx context.Context, before uint64, byCaller bool) (held bool, _ error) {
	var (
		still map[*closer]uint64 // those in their body, with their entry, as the grace runs
		calls callsState         // the handlers, as the grace for them runs
		grace *time.Timer
		// hooks are the delegations' hooks running as the wait for them
		// runs, with their entries, bounded by hooksGrace.
		hooks      map[*hookSlot]uint64
		hooksGrace *time.Timer
	)
	stopHooks := func() {
		if hooksGrace != nil {
			hooksGrace.Stop()
		}
		hooks, hooksGrace = nil, nil
	}
	defer func() {
		if grace != nil {
			grace.Stop()
		}
		stopHooks()
	}()
	restart := func(d time.Duration) {
		if grace != nil {
			grace.Stop()
		}
		grace = time.NewTimer(d)
	}
	for {
		inBody, only := a.inBodyLocked()
		if only && len(inBody) == 0 {
			return false, nil
		}
		var graceC, callsC, hooksC <-chan time.Time
		switch now := a.callsLocked(inBody, before); {
		case only:
			if still == nil || !sameEntries(still, inBody) {
				still = inBody // the grace starts (anew)
				d := a.opts.CancelGrace
				if byCaller && delegationsOnly(inBody) {
					d = HookGrace // they are in their hooks: see AsTool
				}
				restart(d)
			}
			graceC = grace.C
			calls = callsState{}
			stopHooks()
		case now.held:
			if still == nil || !sameEntries(still, inBody) || calls != now {
				still, calls = inBody, now
				restart(a.opts.CancelGrace)
			}
			callsC = grace.C
			if !byCaller {
				break
			}
			if hooks != nil && !stillIn(hooks) {
				stopHooks() // they returned: wait as without them
			}
			if hooks == nil {
				if hooks = a.hooksRunningLocked(); hooks != nil {
					hooksGrace = time.NewTimer(HookGrace)
				}
			}
			if hooksGrace != nil {
				hooksC = hooksGrace.C
			}
		default:
			still, calls = nil, callsState{}
			stopHooks()
		}
		if a.changed == nil {
			a.changed = make(chan struct{})
		}
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-changed:
			a.mu.Lock()
		case <-hooksC:
			a.mu.Lock()
			if inBody, _ := a.inBodyLocked(); a.callsLocked(inBody, before).held && stillIn(hooks) {
				return true, nil // a hook running for HookGrace holds what is left
			}
			stopHooks() // they returned, or something moved: look again
		case <-callsC:
			a.mu.Lock()
			if inBody, _ := a.inBodyLocked(); sameEntries(still, inBody) && a.callsLocked(inBody, before) == calls {
				return true, nil
			}
			still, calls = nil, callsState{} // something moved meanwhile: the grace starts anew
		case <-graceC:
			a.mu.Lock()
			if inBody, only := a.inBodyLocked(); only && len(inBody) > 0 && sameEntries(still, inBody) {
				for c := range inBody { // in the same entry of its body for the grace
					c.cancel(ErrClosed)
				}
				return false, nil
			}
			still = nil // something moved meanwhile: the grace starts anew
		case <-ctx.Done():
			a.mu.Lock()
			return false, ctx.Err()
		}
	}
}

// delegationsOnly tells whether the conversations in inBody are all
// delegations to the agent (cancelled as Close began).
func delegationsOnly(inBody map[*closer]uint64) bool {
	for c := range inBody {
		if !c.delegation {
			return false
		}
	}
	return true
}

// callsState is what awaitConversations knows of the handlers of the
// agent's calls: whether they, with the consumers' bodies, hold every
// conversation left (held), and enough to tell that no handler began
// (seq) or returned (running) since, nor a conversation left (active).
type callsState struct {
	held            bool
	seq             uint64
	running, active int
}

// callsLocked returns the callsState of the agent, whose conversations
// in their consumer's body are inBody. held says that every conversation
// left is in its body or waits for a handler, and that one of those
// handlers began before Close, numbered up to before (with before 0,
// never); a.mu is held.
func (a *Agent) callsLocked(inBody map[*closer]uint64, before uint64) callsState {
	st := callsState{seq: a.calls.seq.Load(), active: a.active}
	if before == 0 {
		return st
	}
	running := a.calls.running(nil)
	if st.running = len(running); st.running == 0 {
		return st
	}
	early := make(map[string]bool, len(running)) // the sessions waiting for handlers: one began before Close
	for _, h := range running {
		if h.ctx.Err() != nil {
			continue // its call was answered: a handler run on past its timeout holds nothing
		}
		early[h.session] = early[h.session] || h.seq <= before
	}
	bodies := make(map[string]bool, len(inBody))
	for c := range inBody {
		bodies[c.session] = true
	}
	suspect, held := false, 0
	for session := range a.sessionsLocked() {
		e, waits := early[session]
		switch {
		case waits:
			suspect = suspect || e
		case !bodies[session]:
			return st // waits for something else: the model, a loop, a drain
		}
		held++
	}
	st.held = suspect && held == a.active
	return st
}

// sessionsLocked yields the sessions of the conversations that entered
// and have not left; a.mu is held.
func (a *Agent) sessionsLocked() iter.Seq[string] {
	return func(yield func(string) bool) {
		if a.busyOne != "" && !yield(a.busyOne) {
			return
		}
		for session := range a.busy {
			if !yield(session) {
				return
			}
		}
	}
}

// inBodyLocked returns the conversations that entered and are in their
// consumer's body, each with its entry (closer.entries), and whether
// they are all that entered and has not left; a.mu is held.
func (a *Agent) inBodyLocked() (map[*closer]uint64, bool) {
	inBody := make(map[*closer]uint64)
	for c := range a.convs {
		if c.inBody.Load() {
			inBody[c] = c.entries.Load()
		}
	}
	return inBody, a.active == len(inBody)
}

// sameEntries tells whether b holds the same conversations (or hooks)
// as a, each in the same entry of its consumer's body (or of the hook).
func sameEntries[K comparable](a, b map[K]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for c, n := range a {
		if m, ok := b[c]; !ok || m != n {
			return false
		}
	}
	return true
}

// changedLocked tells a Close waiting in awaitConversations to look
// again; a.mu is held.
func (a *Agent) changedLocked() {
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// Run runs the conversation msgs of session sessionID to its final
// answer: the model's responses, every tool round, and a follow-up until
// the model answers without calls. An attempt that ends with ERROR is
// resumed or sent again (see [Options].MaxAttempts and Store). It returns
// the answer, or with an error what was answered so far (never nil: an
// empty Answer when nothing was, as for an error that refused the Run at
// once): a
// *[FailedError] when every attempt failed (or the first failure was one
// another attempt would meet again: its Err is then [ErrPermanent]),
// [ErrSessionConflict] (with a Store, the session was started with other
// messages), [ErrLegacySession] (with a Store, the session is kept where
// versions before [SessionKey] kept it: move it with
// [Agent.MigrateSessions]), [ErrInvalidSessionID] or [ErrNoMessages]
// (nothing was sent), an error reading the session from the Store
// (nothing was sent),
// [ErrNoAnswer], ctx's error
// (after ABORT, once every started tool call was answered or CancelGrace
// passed), [ErrSessionBusy], [ErrClosed], an error starting the loop
// (the first conversation starts it: see [New]), or one wrapping
// actors.ErrDuplexStopped once the agent's loop stopped for good (it is
// not started again: see the package doc).
//
// A cancelled Run whose CancelGrace passes before the shared loop has
// ended the conversation (the model slow to notice the cancel) leaves
// the rest to the agent: it reads the conversation's stream to its end
// in the background, and the session stays taken until then. So does a
// Run that leaves before the conversation's end without a cancel (a
// Stream consumer that panicked, a frame it could not read), after
// sending ABORT. A conversation on a loop of its own (with a Store, or
// delegated to within one runtime) has that loop stopped instead; if it
// has not stopped within CancelGrace, the session's next Run waits for
// it to stop before it reads the session or sends anything, bounded by
// its ctx and by Close (see the package doc). A Run,
// Stream, Resume or Discard of the session meanwhile waits for that end
// before it sends anything, so that it never gets the cancelled
// conversation's late frames; if its ctx ends first it returns ctx's
// error, having sent nothing. [ErrSessionBusy] is for a session whose
// conversation runs, not for one being drained.
//
// What bounds that wait is the model adapter: the loop ends an aborted
// conversation as soon as the adapter has answered the ABORT, which the
// models contract has it do at once (ERROR and END, its request's context
// cancelled), and it does not wait for the tool calls under way, which
// are answered as cancelled at once however long their handlers take to
// return. With such an adapter the cancelled Run reads the end itself and
// leaves nothing to drain. The agent sets the wait no bound of its own:
// freeing the session before the loop has ended the old conversation
// would let the next Run's frames into it, and the only other way to end
// it, stopping the shared loop, would end every session's conversation.
// An adapter that never answers the ABORT holds the session until
// [Agent.Close], which stops the loop and so ends the wait.
//
// The answer is the whole conversation, also when the Run resumes a
// durable session (one stopped by a crash, a failed attempt or a
// cancelled Run, in this process or another, or one that had ended):
// with a Store, Run reads the session before each attempt, and the
// answer holds the rounds the session had done, rebuilt from the stored
// conversation, each once, then the rounds of the Run. A rebuilt round
// has what the model said in it, its calls and its results, each with
// its content (the tool message the model read) and, as the store marks
// them beside the conversation, IsError and FailureKind, so that the
// answer's FailedCalls counts the failed calls of rebuilt rounds too.
// A session snapshotted by a version before those marks may lack them
// for the rounds it had done then, whose results then have IsError and
// FailureKind unset (an error result may have any content, a tool's own
// shape, see tools.ResultError: the content does not tell). The round
// the Run resumes (its calls given again, with their stored results,
// answered as interrupted or cancelled, or run) comes from the loop
// with those fields, and with
// what the model said before the stop ([Agent.Stream] gives that text
// as an [EventText] before the round's calls). Usage counts this Run
// only: it sums the token usage of the responses its attempts got, not
// that of earlier Runs of the session, whose rounds it rebuilds (the
// store keeps no usage). Without a Store nothing of a conversation
// outlives its Run: the answer holds the rounds of the Run's attempts
// (of a failed attempt, those whose calls all ran).
func (a *Agent) Run(ctx context.Context, sessionID string, msgs []models.Message) (*models.Answer, error) {
	ans, err := a.run(ctx, sessionID, msgs, nil, nil, false)
	return answered(ans), err
}

// Stream is [Agent.Run] as a sequence of events, for hosts that show
// progress: one event per frame of the loop (see [Event].Frame), plus
// [EventRestart] between attempts. An attempt that resumes a durable
// session in the middle of a round gives, before the round's calls, an
// [EventText] with what the model had said in that round, which the loop
// does not send again. The rounds the session had done before, rebuilt
// from the store, are not given as events: the answer holds them (that
// of [EventDone], or of [EventRestart]). The last event is [EventDone] with
// the answer, or the sequence ends with a non-nil error as Run would
// return it (and an [EventError] whose Text is that error's and whose
// Answer is what was answered so far). A conversation cancelled while
// its calls run still gives the [EventToolResult] of each call, cut or
// finished, before that error.
// Stopping the iteration early cancels the conversation as a cancelled
// ctx does (at an [EventRestart], no further attempt is sent). The events are produced on the caller's goroutine.
func (a *Agent) Stream(ctx context.Context, sessionID string, msgs []models.Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := false
		ans, err := a.run(ctx, sessionID, msgs, nil, func(ev Event) {
			if stopped {
				return
			}
			if !yield(ev, nil) {
				stopped = true
				cancel()
			}
		}, false)
		if stopped {
			return
		}
		if err != nil {
			yield(Event{Kind: EventError, Text: err.Error(), Answer: answered(ans)}, err)
			return
		}
		yield(Event{Kind: EventDone, Answer: ans}, nil)
	}
}

// answered is ans, or an empty answer for a conversation that answered
// nothing: the Answer of Run and Resume, and of the EventError that ends
// a Stream, is never nil.
func answered(ans *models.Answer) *models.Answer {
	if ans == nil {
		return &models.Answer{}
	}
	return ans
}

// enter marks the session busy, and returns the shared loop if it was
// started (else nil). While the loop winds down a cancelled conversation
// of the session (see drain), it waits for that to end, or returns ctx's
// error if ctx ends first.
func (a *Agent) enter(ctx context.Context, sessionID string, c *closer) (*actors.Mux, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		switch {
		case a.closed:
			return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrClosed)
		case a.busyOne == sessionID || a.busy[sessionID]:
			return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrSessionBusy)
		}
		drained, draining := a.draining[sessionID]
		if !draining {
			break
		}
		closing := a.closingLocked()
		a.mu.Unlock()
		select {
		case <-drained:
		case <-closing: // a.closed is set: the loop returns ErrClosed
		case <-ctx.Done():
			a.mu.Lock()
			return nil, context.Cause(ctx)
		}
		a.mu.Lock()
	}
	switch {
	case a.busyOne == "":
		a.busyOne = sessionID
	case a.busy == nil:
		a.busy = map[string]bool{sessionID: true}
	default:
		a.busy[sessionID] = true
	}
	a.active++
	if c != nil {
		if a.convs == nil {
			a.convs = map[*closer]struct{}{}
		}
		a.convs[c] = struct{}{}
	}
	return a.ready, nil
}

// closingLocked returns a.closing, made if no one has yet, for a wait
// that Close must end; nil once the agent is closed (a.closing may then
// never have been made). a.mu is held.
func (a *Agent) closingLocked() chan struct{} {
	if a.closed {
		return nil
	}
	if a.closing == nil {
		a.closing = make(chan struct{})
	}
	return a.closing
}

// untilClosed returns a ctx of ctx, for a wait of a Run that Close must
// end, that also ends when Close begins (at once if it has), with
// ErrClosed as its cause; stop releases it.
func (a *Agent) untilClosed(ctx context.Context) (_ context.Context, stop func()) {
	a.mu.Lock()
	closing := a.closingLocked()
	a.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	if closing == nil {
		cancel(ErrClosed)
		return ctx, func() {}
	}
	go func() {
		select {
		case <-closing:
			cancel(ErrClosed)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// leave ends what enter began (c is what enter was given). With drain, a
// stream of the shared loop whose cancelled conversation the loop has
// not ended yet, the session stays taken until a drain goroutine has
// read the stream to its end. With own, the conversation's own loop,
// which has not stopped yet, the session's next Run waits for it to stop
// (see conversation.awaitEarlier), and so does Close; a conversation
// that Close cancelled in its consumer's body and did not wait for,
// leaving last, gives the agent's name back once own has stopped.
func (a *Agent) leave(sessionID string, c *closer, drain *actors.MuxStream, own *actors.Mux) {
	a.disownLoop(own)
	a.mu.Lock()
	a.active--
	delete(a.convs, c)
	delete(a.ownLoops, own)
	a.changedLocked()
	if a.busyOne == sessionID {
		a.busyOne = ""
	} else {
		delete(a.busy, sessionID)
	}
	if own != nil && !own.Stopped() { // also once closed: Close waits for it
		for id, m := range a.stopping {
			if m.Stopped() {
				delete(a.stopping, id)
			}
		}
		if a.stopping == nil {
			a.stopping = map[string]*actors.Mux{}
		}
		a.stopping[sessionID] = own
	}
	if a.leftInBody && a.active == 0 {
		a.leftInBody = false
		a.releaseAfter(a.stopping)
		a.stopping = nil
	}
	var drained chan struct{}
	if drain != nil {
		drained = make(chan struct{})
		if a.draining == nil {
			a.draining = map[string]chan struct{}{}
		}
		a.draining[sessionID] = drained
		// Before active goes down (under the same lock): a Close that
		// saw every conversation return waits for this drain too.
		a.drains.Add(1)
	}
	a.mu.Unlock()
	if drain != nil {
		go a.drain(sessionID, drain, drained)
	}
}

// releaseAfter gives the agent's name on its Store back once the loops
// still stopping in stopping have stopped: at once when none is, else
// from a goroutine that waits for them.
func (a *Agent) releaseAfter(stopping map[string]*actors.Mux) {
	var loops []*actors.Mux
	for _, m := range stopping {
		if !m.Stopped() {
			loops = append(loops, m)
		}
	}
	if len(loops) == 0 {
		a.claim.release()
		return
	}
	go func() {
		for _, m := range loops {
			_ = m.Close(context.Background()) // it stops: wait until it is gone
		}
		a.claim.release()
	}()
}

// drain reads s, the stream of a conversation that was aborted, until
// its END (the loop has answered every call and forgotten the stream) or
// until the loop stops, drops what it reads, releases s and frees the
// session: a stream of the same id opened before that would get the old
// conversation's late frames, and the loop would take its request into
// the old conversation.
func (a *Agent) drain(sessionID string, s *actors.MuxStream, drained chan struct{}) {
	defer a.drains.Done()
	for {
		f, err := s.Recv(context.Background())
		if err != nil || f.GetType() == messages.FrameType_END {
			break // the loop stopped (ErrDuplexStopped), or the stream ended
		}
	}
	s.Release()
	a.mu.Lock()
	delete(a.draining, sessionID)
	a.mu.Unlock()
	close(drained)
}

// closer is what Close needs of a conversation it may cancel rather
// than wait for: a delegation, or one with a consumer (emit).
type closer struct {
	// cancel cancels the Run's ctx: Close cancels a delegation, and a
	// conversation in its consumer's body (inBody: emit is calling the
	// consumer), with ErrClosed (see Agent.awaitConversations).
	cancel     context.CancelCauseFunc
	delegation bool
	session    string
	inBody     atomic.Bool
	// entries counts the consumer's body entries: Close cancels a
	// conversation in its body only once it has stayed in one entry for
	// CancelGrace (see Agent.awaitConversations).
	entries atomic.Uint64
}

// conversation is one Run.
type conversation struct {
	a       *Agent
	session string
	emit    func(Event)
	// closer lets Close cancel the Run: nil for a conversation without a
	// consumer that is no delegation, which Close waits for.
	closer *closer

	first json.RawMessage // the messages payload of the first attempt
	// supervisorStopped is the conversation's own loop when a supervisor
	// decided to stop it during an attempt (the next attempt then runs on
	// a fresh loop); a loop stopped without that decision was stopped by
	// its parent, and is not replaced.
	supervisorStopped *actors.Mux
	history           []json.RawMessage
	// keptRounds and keptUsage are what the attempts that failed
	// contributed (with a Store, the rounds the stored session had done).
	keptRounds []models.Round
	keptUsage  models.Usage
	// resumed, with a Store, is the response whose calls the next
	// attempt's loop gives again, resuming the stored session (nil when
	// there is none): the loop does not send its text again, the attempt
	// adds it (see resumedResponse.says).
	resumed *resumedResponse
	// parent, when set, is the actor the conversation's own loop runs
	// under (a delegation: the calling tool's actor).
	parent *actors.Parent
	mux    *actors.Mux // the conversation's own loop (with a Store or a parent)
	// drain is the stream of the shared loop left to read to its end when
	// the conversation returns: it was aborted and CancelGrace passed
	// before its END.
	drain    *actors.MuxStream
	shared   *actors.Mux // the agent's shared loop, when started before the conversation
	approval *approvalState
	// failure is the failure kind of the last attempt's ERROR:
	// actors.StoppedKind when it ended because the loop was stopped (its
	// ERROR frame's failure kind, or its stream's end without one), one
	// that says another attempt cannot help, or "".
	failure string
	// served: the last attempt's stream got a frame from the loop other
	// than ERROR and END.
	served bool
}

// run runs a conversation. With parent, its loop is started for it as a
// child of that actor, and stopped at the end; otherwise it is the
// agent's shared loop, or with a Store one started for the session. A
// delegation's session (see AsTool), which nothing can name again, is
// deleted from the Store once the conversation has returned and its loop
// has stopped, unless it waits for approval (see forget); so is one
// this Agent started that a Resume (or Run) goes on with.
//
// Its steps are functions of their own (converse, entered, prepared,
// attempts), each with few defers or few returns: the compiler codes the
// defers of such a function inline, where one function holding them all,
// with the attempts' many returns, had the runtime queue and run each of
// them, some 20–30 ns a defer on every Run.
func (a *Agent) run(ctx context.Context, sessionID string, msgs []models.Message, parent *actors.Parent, emit func(Event), delegation bool) (*models.Answer, error) {
	if err := a.usable(); err != nil {
		return nil, err
	}
	if err := a.checkSession(sessionID); err != nil {
		return nil, err
	}
	if len(msgs) == 0 && !resuming(ctx) {
		return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrNoMessages)
	}
	ans, err := a.converse(ctx, sessionID, msgs, parent, emit, delegation)
	if err == ErrClosed { // the cause of a ctx Close cancelled
		err = fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrClosed)
	}
	return ans, err
}

// converse runs a conversation run has checked: it takes the session
// (enter), with a closer when Close may cancel the conversation, and
// runs it (entered).
func (a *Agent) converse(ctx context.Context, sessionID string, msgs []models.Message, parent *actors.Parent, emit func(Event), delegation bool) (*models.Answer, error) {
	c := &conversation{a: a, session: sessionID, parent: parent}
	if emit != nil || delegation {
		// Close may cancel it (see Agent.awaitConversations); a Run
		// without a consumer it waits for, and pays for no ctx.
		cl := &closer{delegation: delegation, session: sessionID}
		ctx, cl.cancel = context.WithCancelCause(ctx)
		defer cl.cancel(nil)
		c.closer = cl
		if emit != nil {
			c.emit = func(ev Event) {
				cl.entries.Add(1)
				cl.inBody.Store(true)
				if a.closeWaits.Load() { // a Close waiting for it looks again
					a.mu.Lock()
					a.changedLocked()
					a.mu.Unlock()
				}
				emit(ev)
				cl.inBody.Store(false)
			}
		}
	}
	shared, err := a.enter(ctx, sessionID, c.closer)
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrSessionBusy):
		return nil, err
	case err != nil: // ctx ended while the session drained: nothing was sent
		return &models.Answer{}, err
	}
	c.shared = shared
	return c.entered(ctx, msgs, emit, delegation)
}

// entered runs the conversation c, whose session it has taken, and gives
// the session back (leave) once it returns.
func (c *conversation) entered(ctx context.Context, msgs []models.Message, emit func(Event), delegation bool) (_ *models.Answer, err error) {
	a, sessionID := c.a, c.session
	defer func() { a.leave(sessionID, c.closer, c.drain, c.mux) }()
	if a.opts.Store != nil && (delegation || a.delegationSession(sessionID)) {
		// A delegation resumed after it waited for approval is one too.
		defer func() { c.forget(ctx, err) }() // after stopLoop: deferred before it
	}
	if ctx.Err() != nil { // nothing is sent or taken: a waiting session waits on
		return &models.Answer{}, context.Cause(ctx)
	}
	if c.ownLoop() {
		if err := c.awaitEarlier(ctx); err != nil { // nothing was read or sent
			return &models.Answer{}, err
		}
	}
	c.first = a.encoded.encode(msgs)
	if a.opts.Store != nil {
		if err := c.readStored(ctx, true); err != nil {
			return nil, err
		}
	}
	if ans, err := c.prepareApproval(ctx); err != nil { // ans: what a session still waiting answered so far
		return ans, err
	}
	return c.prepared(ctx, emit)
}

// prepared runs the attempts of the conversation c, ready to be sent,
// and then leaves a Resume's held calls waiting when nothing was sent
// (keepWaiting) and stops the conversation's own loop, if it has one.
func (c *conversation) prepared(ctx context.Context, emit func(Event)) (*models.Answer, error) {
	defer c.keepWaiting()
	if c.ownLoop() {
		defer c.stopLoop(ctx)
	}
	return c.attempts(ctx, emit)
}

// attempts sends the conversation c's attempts until one answers, or one
// fails in a way another attempt cannot help, or they are used up. emit
// is Stream's consumer (nil for Run), told of each restart.
func (c *conversation) attempts(ctx context.Context, emit func(Event)) (*models.Answer, error) {
	a, sessionID := c.a, c.session
	payload := c.first
	spent := 0     // the attempts counted against MaxAttempts
	uncounted := 0 // those not counted (see refusedByRestart)
	restarts := -1 // the loop's restarts when it ran again after one, before this attempt; -1: none
	for attempt := 1; ; attempt++ {
		if attempt > 1 && ctx.Err() != nil {
			// Cancelled between attempts (a Stream consumer that stopped
			// at EventRestart included): no further attempt is sent.
			return c.result(nil), context.Cause(ctx)
		}
		mux, err := c.loop(ctx)
		if err != nil {
			return c.result(nil), err
		}
		// failed: the loop failed during this attempt (looked at after a
		// restart, and with a Store for a permanent store error, see
		// permanentStore: else nil, and nothing allocated).
		failed, unwatch := watchLoop(a.rt, mux, restarts >= 0 || c.ownLoop())
		ans, err := c.attempt(ctx, mux, StreamID(sessionID, attempt), payload, attempt)
		unwatch()
		if failed.stoppedBySupervisor() {
			c.supervisorStopped = mux
		}
		refused := err == nil && c.refusedByRestart(mux, ans, restarts, failed.failed())
		if refused {
			uncounted++
		} else {
			spent++
		}
		// Merge only on the way out: result changes ans, and a retry keeps
		// ans's own rounds, not those already kept.
		switch {
		case err != nil:
			return c.result(ans), err
		case ans.Answered:
			return c.result(ans), nil
		case !ans.Failed:
			return c.result(ans), fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrNoAnswer)
		case errors.Is(context.Cause(ctx), ErrClosed):
			// Close cancelled it (a delegation, or a conversation in its
			// consumer's body) and stopped the loop that failed it.
			return c.result(ans), fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrClosed)
		case c.failure == string(tools.FailureSessionConflict):
			return c.result(ans), fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), ErrSessionConflict)
		case c.failure == actors.StoppedKind && !c.ownLoop():
			// The shared loop stops for good: it closed the attempt, or
			// refused it, as stopped, and is not started again (see
			// sharedLoop). Another attempt would meet the same.
			return c.result(ans), fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(sessionID), actors.ErrDuplexStopped)
		case c.failure == models.FailurePermanent:
			return c.result(ans), &FailedError{Agent: a.opts.Name, Session: sessionID, Attempts: spent, Uncounted: uncounted, Reason: ans.Error, Err: ErrPermanent}
		case failed.permanentErr() != nil:
			return c.result(ans), &FailedError{Agent: a.opts.Name, Session: sessionID, Attempts: spent, Uncounted: uncounted, Reason: ans.Error,
				Err: permanentStore(failed.permanentErr())}
		case refused && uncounted >= a.opts.MaxUncountedAttempts:
			// The loop's supervisor bounds its restarts per window of
			// time only: a sibling that keeps failing would keep the Run
			// going.
			return c.result(ans), &FailedError{Agent: a.opts.Name, Session: sessionID, Attempts: spent, Uncounted: uncounted, Reason: ans.Error, Err: ErrLoopRestarting}
		case c.failure == actors.StoppedKind && c.ownLoop() && c.supervisorStopped != mux:
			// The conversation's own loop was stopped, and no supervisor
			// decided so: its parent (the runtime's host, or the Parent
			// delegated to) is stopping, or was stopped. A stop wins over
			// the retries: a fresh loop would start under a parent going
			// away and run the conversation on.
			return c.result(ans), &FailedError{Agent: a.opts.Name, Session: sessionID, Attempts: spent, Uncounted: uncounted, Reason: ans.Error, Err: actors.ErrDuplexStopped}
		case !refused && spent >= a.opts.MaxAttempts:
			fe := &FailedError{Agent: a.opts.Name, Session: sessionID, Attempts: spent, Uncounted: uncounted, Reason: ans.Error}
			if c.failure == actors.StoppedKind {
				fe.Err = actors.ErrDuplexStopped
			}
			return c.result(ans), fe
		}
		// Keep what ran, and ask again.
		c.keep(ans)
		if restarts = -1; c.failure == "" {
			// A failure of no kind may be the loop's restart (its
			// incarnation ended, closing the attempt, or refusing it):
			// the next attempt waits for the loop to run again.
			if restarts, err = c.awaitRestart(ctx, mux); err != nil {
				return c.result(nil), err
			}
		}
		if a.opts.Store == nil {
			payload = models.JoinMessages(append(c.splitFirst(), c.history...))
		} else if err := c.readStored(ctx, false); durability.IsPermanent(err) {
			// The next attempt would resume the stored session from what
			// the store holds, the rounds just kept included; a store
			// that cannot give it, for good, fails the Run now. Another
			// error leaves the rounds kept as they are (see readStored).
			return c.result(nil), &FailedError{Agent: a.opts.Name, Session: sessionID, Attempts: spent, Uncounted: uncounted, Reason: ans.Error,
				Err: permanentStore(fmt.Errorf("read the session from the store: %w", err))}
		}
		if emit != nil {
			emit(Event{Kind: EventRestart, Attempt: attempt + 1, Text: ans.Error, Answer: c.result(nil)})
		}
	}
}

// permanentStore is the cause of a Run that gives up on a store error
// that another attempt would meet again (durability.IsPermanent): both
// ErrPermanent and err, for errors.Is and errors.As.
func permanentStore(err error) error {
	return fmt.Errorf("%w: the store failed for good: %w", ErrPermanent, err)
}

// splitFirst returns the first request's messages as raw elements.
func (c *conversation) splitFirst() []json.RawMessage {
	list, _ := models.SplitMessages(c.first) // encoded here: always an array
	return list
}

// keep adds the rounds of a failed attempt whose calls all ran to what
// the next attempt sends and to the answer (with a Store, readStored
// then replaces them with the store's record, unless it cannot read it).
func (c *conversation) keep(ans *models.Answer) {
	for _, r := range ans.Rounds {
		if !r.Complete() || !ran(r) {
			continue
		}
		c.keptRounds = append(c.keptRounds, r)
		for _, m := range r.Messages() {
			c.history = append(c.history, m.AppendJSON(nil))
		}
	}
	c.keptUsage = c.keptUsage.Add(ans.Usage)
}

// ran reports whether every call of r ran: none was answered "stopped"
// because the loop or the model failed first.
func ran(r models.Round) bool {
	for _, res := range r.Results {
		if res.FailureKind == string(tools.FailureStopped) {
			return false
		}
	}
	return true
}

// result merges the kept rounds (of failed attempts, or with a Store the
// rounds the stored session had done before the last attempt) with the
// last attempt's, in last itself: call it once, when the conversation
// returns.
func (c *conversation) result(last *models.Answer) *models.Answer {
	if last == nil {
		return &models.Answer{Rounds: c.keptRounds, Usage: c.keptUsage}
	}
	if kept := c.keptRounds; len(kept) > 0 {
		last.Rounds = append(kept[:len(kept):len(kept)], last.Rounds...)
	}
	last.Usage = c.keptUsage.Add(last.Usage)
	return last
}

// readStored reads, before an attempt of a durable conversation, what the
// store holds of the session, which the attempt's loop resumes: the
// rounds it has done become the conversation's kept rounds (the store
// is the record of what ran: a round the loop gives again is not among
// them), and the response whose calls the loop gives again is noted in
// c.resumed. Before the first attempt (first), a session not stored is
// looked for where versions before SessionKey kept it (checkLegacy), and
// a read that fails fails the Run, nothing sent; before a later one, a
// failed read leaves the rounds kept as they are.
func (c *conversation) readStored(ctx context.Context, first bool) error {
	a := c.a
	c.resumed = nil
	st, ok, err := tools.ReadSession(ctx, a.opts.Store, a.SessionKey(c.session))
	switch {
	case err != nil && first:
		return fmt.Errorf("agent %q: session %q: read it from the store: %w", clip(a.opts.Name), clip(c.session), err)
	case err != nil:
		return err
	case !ok && first:
		return c.checkLegacy(ctx)
	case !ok:
		c.keptRounds = nil // nothing was stored: no round ended
		return nil
	case !bytes.Equal(st.GetFirstRequest(), c.first):
		return nil // another conversation: the loop refuses the request
	}
	c.keptRounds = storedRounds(st)
	if st.GetPhase() != messages.LoopPhase_LOOP_PHASE_DONE && len(st.GetCalls()) > 0 {
		c.resumed = &resumedResponse{text: st.GetText(), call: st.GetCalls()[0].GetCall().GetToolCallId(), calls: st.GetCalls()}
	}
	return nil
}

// resumedResponse is the response, interrupted when the session stopped,
// whose calls a resumed loop gives again (with their stored results, or
// run or answered anew) without what the model said along with them.
type resumedResponse struct {
	text string // what the model said in it
	call string // the id of its first call
	told bool   // the attempt has given the text
	// calls are its calls as stored: their TOOL_CALL frames, whose
	// arguments are the model's bytes.
	calls []*messages.LoopCall
}

// says returns, for f the TOOL_CALL of the resumed response's first
// call, a TEXT frame of f's stream with what the model said before it,
// which the loop does not send again; nil for any other frame, for a
// response that said nothing, and once it was returned.
func (r *resumedResponse) says(f *messages.Frame) *messages.Frame {
	if r == nil || r.told || r.text == "" || f.GetType() != messages.FrameType_TOOL_CALL || f.GetToolCallId() != r.call {
		return nil
	}
	r.told = true
	return messages.Text(f.GetStreamId(), r.text)
}

// storedRounds rebuilds the rounds a stored session has done from its
// conversation: after the messages it started with (the system prompt,
// if any, and the first request's), each round is an assistant message
// with its calls followed by one tool message per call, in call order.
// The store keeps them as the model reads them: a result has its call's
// id and name and its content; whether it was an error result, and its
// failure kind, come from the session's result marks, which a session
// stored before them lacks. Messages it cannot read as rounds end the
// list.
func storedRounds(st *messages.LoopSession) []models.Round {
	msgs := st.GetMessages()
	marks := make(map[int]*messages.ResultMark, len(st.GetResultMarks()))
	for _, mk := range st.GetResultMarks() {
		marks[int(mk.GetMessage())] = mk
	}
	firstReq, err := models.SplitMessages(st.GetFirstRequest())
	if err != nil {
		return nil
	}
	start := -1
	for _, skip := range []int{1, 0} { // after a system prompt, or without one
		if skip+len(firstReq) <= len(msgs) && sameMessages(msgs[skip:skip+len(firstReq)], firstReq) {
			start = skip + len(firstReq)
			break
		}
	}
	if start < 0 {
		return nil
	}
	var rounds []models.Round
	for i := start; i < len(msgs); {
		var m models.Message
		if json.Unmarshal(msgs[i], &m) != nil || m.Role != models.RoleAssistant || len(m.ToolCalls) == 0 ||
			i+len(m.ToolCalls) >= len(msgs) {
			break
		}
		r := models.Round{Text: m.Content, Calls: m.ToolCalls, Results: make([]models.ToolResult, len(m.ToolCalls))}
		for j, call := range m.ToolCalls {
			var res models.Message
			if json.Unmarshal(msgs[i+1+j], &res) != nil || res.Role != models.RoleTool || res.ToolCallID != call.ID {
				return rounds
			}
			r.Results[j] = models.ToolResult{CallID: call.ID, Name: call.Name, Content: json.RawMessage(res.Content)}
			if mk := marks[i+1+j]; mk.GetToolCallId() == call.ID {
				r.Results[j].IsError, r.Results[j].FailureKind = mk.GetIsError(), mk.GetFailureKind()
			}
		}
		rounds = append(rounds, r)
		i += 1 + len(m.ToolCalls)
	}
	return rounds
}

// sameMessages reports whether the stored messages a are b, byte for
// byte.
func sameMessages(a [][]byte, b []json.RawMessage) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// ownLoop reports whether the conversation runs on a loop of its own.
func (c *conversation) ownLoop() bool { return c.a.opts.Store != nil || c.parent != nil }

// loop returns the mux of the loop serving this conversation, starting
// the conversation's own loop when it has one (again, when it stopped,
// or once it has stopped when it closed or refused the last attempt as
// stopped: see awaitStop), or
// else the agent's shared loop when no conversation has yet.
func (c *conversation) loop(ctx context.Context) (*actors.Mux, error) {
	a := c.a
	if !c.ownLoop() {
		if c.shared != nil {
			return c.shared, nil
		}
		return a.sharedLoop(ctx)
	}
	if c.mux != nil && !c.mux.Stopped() {
		if c.failure != actors.StoppedKind {
			return c.mux, nil
		}
		if err := c.awaitStop(ctx); err != nil {
			return nil, err
		}
	}
	opts := a.loop
	if a.opts.Store != nil {
		opts.Session = &tools.SessionOptions{ID: a.SessionKey(c.session), Store: a.opts.Store}
	}
	spec, err := tools.NewLoop(a.model, &opts)
	if err != nil {
		return nil, fmt.Errorf("agent %q: session %q: %w", clip(a.opts.Name), clip(c.session), err)
	}
	spec = a.traced(spec)
	start := a.rt.StartMux
	if c.parent != nil {
		start = c.parent.StartMux
	}
	old := c.mux
	c.mux, err = start(spec)
	a.mu.Lock()
	delete(a.ownLoops, old) // stopped: the conversation's loop is the new one
	if err == nil {
		if a.ownLoops == nil {
			a.ownLoops = map[*actors.Mux]struct{}{}
		}
		a.ownLoops[c.mux] = struct{}{}
	}
	a.mu.Unlock()
	a.disownLoop(old)
	if err == nil {
		a.ownLoop(c.mux)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %q: session %q: start: %w", clip(a.opts.Name), clip(c.session), err)
	}
	return c.mux, nil
}

// loopState returns the state of the loop actor of mux and its
// restarts; ok false when the runtime has it no more (it stopped), or
// it runs in another runtime.
func (c *conversation) loopState(mux *actors.Mux) (state actors.ActorState, restarts int, ok bool) {
	id := mux.Ref().String()
	for _, ai := range c.a.rt.Actors() {
		if ai.ID == id {
			return ai.State, ai.Restarts, true
		}
	}
	return 0, 0, false
}

// awaitRestart waits while the loop of mux restarts (it failed and waits
// for its restart, or its incarnation has ended and the next has not
// started), until it runs again or has stopped, or until ctx ends (it
// returns ctx's error, wrapped) or the agent is closed (it returns an
// error wrapping ErrClosed: Close waits for the Run). It returns the
// loop's restarts once it runs again; -1 when it runs no more, or is not
// known to the agent's runtime. An attempt sent to a loop that restarts
// after failing would wait in its queue until it runs again; one
// restarted for another's failure (a supervisor's all-for-one decision)
// takes frames while its children stop, and refuses them at once.
func (c *conversation) awaitRestart(ctx context.Context, mux *actors.Mux) (int, error) {
	ctx, stopClose := c.a.untilClosed(ctx)
	defer stopClose()
	changed := make(chan struct{}, 1)
	id := mux.Ref().String()
	stop := c.a.rt.WatchActors(func(ev actors.ActorEvent) {
		if ev.Actor.ID == id {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	for {
		state, restarts, ok := c.loopState(mux)
		switch {
		case !ok || state == actors.ActorStopped || mux.Stopped():
			return -1, nil
		case state == actors.ActorRunning:
			return restarts, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return -1, fmt.Errorf("agent %q: session %q: wait for its loop to restart: %w", clip(c.a.opts.Name), clip(c.session), context.Cause(ctx))
		}
	}
}

// loopFailed is set when a supervisor decides about the failure of the
// loop it watches; permanent keeps the first such failure that
// durability.IsPermanent says another attempt would meet again (a store
// that refuses the loop's writes for good, a record it finds damaged).
type loopFailed struct {
	atomic.Bool
	stopped   atomic.Bool // a supervisor decided to stop the loop
	permanent atomic.Pointer[error]
}

// failed reports whether f was set; a nil f (an attempt not watched) was
// not.
func (f *loopFailed) failed() bool { return f != nil && f.Load() }

// stoppedBySupervisor reports whether a supervisor decided, while f
// watched, to stop the loop.
func (f *loopFailed) stoppedBySupervisor() bool { return f != nil && f.stopped.Load() }

// permanentErr returns the loop's permanent failure, if f saw one.
func (f *loopFailed) permanentErr() error {
	if f == nil {
		return nil
	}
	if p := f.permanent.Load(); p != nil {
		return *p
	}
	return nil
}

// watchLoop, when on, returns a flag set by every supervision decision
// about the loop of mux until the returned function is called; else nil,
// allocating nothing (the common attempt on the shared loop, not sent
// after a restart). A supervisor decides before the loop's streams get
// the ERROR that ends the attempt.
func watchLoop(rt *actors.Runtime, mux *actors.Mux, on bool) (*loopFailed, func()) {
	if !on {
		return nil, func() {}
	}
	f, id := new(loopFailed), mux.Ref().String()
	return f, rt.WatchSupervision(func(ev supervisor.Event) {
		if ev.Child == id {
			f.Store(true)
		}
		if ev.Directive == supervisor.Stop && (ev.Child == id || slices.Contains(ev.Affected, id)) {
			f.stopped.Store(true)
		}
		if ev.Child == id {
			if durability.IsPermanent(ev.Reason) {
				reason := ev.Reason
				f.permanent.CompareAndSwap(nil, &reason)
			}
		}
	})
}

// refusedByRestart reports whether the attempt ans, sent to the loop of
// mux once it ran again after a restart with restarts (-1: it was not
// sent after one), was refused, or closed before the loop served it, by
// a restart of the loop that it did not cause: it got ERROR without a
// failure kind and END alone, and the loop has restarted since, without
// having failed during the attempt (failed). Such an attempt is not
// counted against MaxAttempts; one during which the loop itself failed
// is, so that a loop that fails on every request still fails the Run
// after MaxAttempts. Only an attempt sent after a restart is looked at,
// and each is sent once the loop runs again (awaitRestart). The attempts
// not counted are bounded by MaxUncountedAttempts: the loop's supervisor
// bounds its restarts per window of time, not in all.
func (c *conversation) refusedByRestart(mux *actors.Mux, ans *models.Answer, restarts int, failed bool) bool {
	if restarts < 0 || failed || c.failure != "" || c.served || !ans.Failed {
		return false
	}
	state, now, ok := c.loopState(mux)
	return ok && state != actors.ActorStopped && now > restarts
}

// awaitEarlier waits, before the conversation reads its session or sends
// anything, until the own loop of the session's last Run has stopped, if
// that Run returned while it was still stopping (its ctx ended while it
// waited in awaitStop, or CancelGrace passed in stopLoop): a fresh loop
// never runs beside it, across Runs as within one. It takes that loop as
// the conversation's, stopped (loop then starts a fresh one), or, when
// the wait ends first (see awaitStop), still stopping: leave gives it
// back to the session.
func (c *conversation) awaitEarlier(ctx context.Context) error {
	a := c.a
	a.mu.Lock()
	c.mux = a.stopping[c.session]
	delete(a.stopping, c.session)
	a.mu.Unlock()
	if c.mux == nil || c.mux.Stopped() {
		return nil
	}
	return c.awaitStop(ctx)
}

// awaitStop waits until the conversation's own loop, which closed or
// refused the last attempt as stopped (it stops for good, its children
// still finishing), has stopped, or until ctx ends (it returns ctx's
// error, wrapped) or the agent is closed (it returns an error wrapping
// ErrClosed: Close waits for the Run, then for the loop). A loop
// stopping refuses every attempt at once: the next attempt runs on a
// fresh loop, started once the old one is gone, so that the two never
// run side by side. Mux.Close of a loop stopping already stops nothing
// more: it waits until the loop is gone.
func (c *conversation) awaitStop(ctx context.Context) error {
	a := c.a
	ctx, stop := a.untilClosed(ctx)
	defer stop()
	if err := c.mux.Close(ctx); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx) // the Run's, or ErrClosed
		}
		return fmt.Errorf("agent %q: session %q: wait for its stopping loop to stop: %w", clip(a.opts.Name), clip(c.session), err)
	}
	return nil
}

// stopLoop stops the conversation's own loop, waiting CancelGrace at
// most for it to be gone. ctx is the Run's: its values go on (see
// graceCtx), its end does not.
func (c *conversation) stopLoop(ctx context.Context) {
	if c.mux == nil {
		return
	}
	ctx, cancel := c.a.graceCtx(ctx)
	defer cancel()
	_ = c.mux.Close(ctx)
}

// attempt sends one request on stream and follows it to its END.
func (c *conversation) attempt(ctx context.Context, mux *actors.Mux, stream string, payload json.RawMessage, n int) (*models.Answer, error) {
	stream = c.streamOf(stream)
	// A Run that shows no progress and asks no approvals reads the
	// frames once the stream has ended: it sleeps through the
	// conversation instead of being woken for every frame.
	batched := c.emit == nil && c.approval == nil
	s := c.heldStream(stream)
	if s == nil {
		var wake func(*messages.Frame) bool
		switch {
		case batched:
			wake = isEnd
		case c.approval != nil && !c.ownLoop():
			// The stream may be left waiting for a Resume: its flag says
			// when its conversation failed meanwhile (see Agent.Waiting).
			failed := new(atomic.Bool)
			c.approval.failed = failed
			wake = func(f *messages.Frame) bool {
				if f.GetType() == messages.FrameType_ERROR {
					failed.Store(true)
				}
				return true
			}
		}
		var err error
		if s, err = mux.OpenWake(stream, wake); err != nil {
			return nil, fmt.Errorf("agent %q: session %q: %w", clip(c.a.opts.Name), clip(c.session), err)
		}
	}
	kept := false    // the stream waits for a Resume
	sent := false    // the request went out: the loop works on it until its END
	aborted := false // cancelled: ABORT sent and read on for CancelGrace
	done := false    // the loop stopped, which ends every stream
	var ans *models.Answer
	defer func() {
		switch {
		case kept:
		case sent && !ans.Ended && !done && !c.ownLoop():
			// Left before the END (cancelled past CancelGrace, a Stream
			// consumer that panicked, a frame it could not read): the
			// shared loop still works on the conversation, which is
			// aborted and read to its end once the Run has returned (see
			// Agent.drain).
			if !aborted {
				_ = s.Send(messages.Abort(s.ID()))
			}
			c.drain = s
		default:
			s.Release() // s is not used after: the next attempt or Run takes it
		}
	}()
	// The answer a Resume goes on with is taken before open forgets the
	// stream left waiting; a new one after the request is sent, while
	// the loop works on it, as a host playing the loop by hand would.
	if c.approval != nil {
		ans = c.answerOf(stream)
	}
	err := c.open(s, payload)
	if ans == nil {
		ans = models.NewAnswer(stream)
	}
	if err != nil {
		return ans, fmt.Errorf("agent %q: session %q: send: %w", clip(c.a.opts.Name), clip(c.session), err)
	}
	sent = true
	c.served = false
	// Woken at END only, the reader finds the stream's frames queued and
	// takes them in one batch, one lock for all instead of one each: that
	// work comes after the loop's last frame, on the run's critical path.
	var room [16]*messages.Frame
	var batch []*messages.Frame // read and not yet handled
	for {
		var f *messages.Frame
		var err error
		switch {
		case !batched:
			f, err = s.Recv(ctx)
		case len(batch) == 0:
			batch, err = s.RecvAll(ctx, room[:0])
			switch {
			case err != nil:
			case c.resumed == nil:
				// No resumed response to tell: the batch is folded in
				// one loop, without the per-frame steps of progress
				// and approvals.
				if c.foldBatch(ans, batch) {
					return ans, nil
				}
				batch = batch[:0]
				continue
			default:
				f, batch = batch[0], batch[1:]
			}
		default:
			f, batch = batch[0], batch[1:]
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			aborted, done = true, c.abort(ctx, s, ans, n)
			return ans, context.Cause(ctx)
		case errors.Is(err, actors.ErrDuplexStopped) && !ans.Ended:
			// The loop was stopped for good: the attempt failed.
			ans.Failed, ans.Error, ans.Ended = true, "the tool loop stopped", true
			c.failure = actors.StoppedKind
			if c.emit != nil {
				c.emit(Event{Kind: EventError, Attempt: n, Text: ans.Error})
			}
			return ans, nil
		default:
			return ans, fmt.Errorf("agent %q: session %q: %w", clip(c.a.opts.Name), clip(c.session), err)
		}
		if said := c.resumed.says(f); said != nil {
			// Before the resumed response's calls, as the model said it.
			ans.Add(said)
			if c.emit != nil {
				c.emit(event(said, n))
			}
		}
		c.add(ans, f)
		if c.emit != nil {
			c.emit(event(f, n))
		}
		if kept, err = c.waitingFor(f, ans, s); err != nil {
			return ans, err
		}
		if ans.Ended {
			return ans, nil
		}
	}
}

// foldBatch folds frames, read in one batch by an attempt that shows no
// progress and asks no approvals, into ans, as the attempt's loop does
// frame by frame, and reports whether they ended the stream (frames
// after its END are dropped, as the loop drops them).
func (c *conversation) foldBatch(ans *models.Answer, frames []*messages.Frame) (ended bool) {
	for _, f := range frames {
		c.add(ans, f)
		if ans.Ended {
			return true
		}
	}
	return false
}

// add folds f, a frame of the attempt's stream, into ans, and notes what
// the attempt's outcome needs of it: an ERROR's failure kind, and
// whether the loop served the stream (a frame other than ERROR and END).
func (c *conversation) add(ans *models.Answer, f *messages.Frame) {
	ans.Add(f)
	switch f.GetType() {
	case messages.FrameType_ERROR:
		c.failure = f.GetMeta().GetFailureKind()
	case messages.FrameType_END:
	default:
		c.served = true
	}
}

func isEnd(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END }

// abort sends ABORT for the stream and reads on until its END, so that
// every call that started is answered, for CancelGrace at most. Each
// frame read is an event of attempt n, as the attempt's others are: the
// results of the calls cut, and of those that finished meanwhile, are
// told before the Run's error. ctx is the Run's, ended: the read keeps
// its values (see graceCtx). It reports whether the loop stopped
// meanwhile (an ended stream sets ans.Ended).
func (c *conversation) abort(ctx context.Context, s *actors.MuxStream, ans *models.Answer, n int) (stopped bool) {
	ctx, cancel := c.a.graceCtx(ctx)
	defer cancel()
	var each func(*messages.Frame)
	if c.emit != nil {
		each = func(f *messages.Frame) { c.emit(event(f, n)) }
	}
	return errors.Is(abortStream(ctx, s, ans, each), actors.ErrDuplexStopped)
}

// abortStream sends ABORT for s and reads on until its END (every call
// that started is then answered), or until ctx ends or the loop stops:
// it returns that error. each, when not nil, is given every frame read,
// once ans has it.
func abortStream(ctx context.Context, s *actors.MuxStream, ans *models.Answer, each func(*messages.Frame)) error {
	_ = s.Send(messages.Abort(s.ID()))
	for !ans.Ended {
		f, err := s.Recv(ctx)
		if err != nil {
			return err
		}
		ans.Add(f)
		if each != nil {
			each(f)
		}
	}
	return nil
}

// event turns a frame of the loop into an event for Stream.
func event(f *messages.Frame, n int) Event {
	ev := Event{Kind: EventFrame, Attempt: n, Frame: f}
	switch f.GetType() {
	case messages.FrameType_TEXT:
		if !f.IsToolArgChunk() {
			ev.Kind, ev.Text = EventText, f.GetText()
		}
	case messages.FrameType_TOOL_CALL:
		ev.Kind = EventToolCall
		ev.Call = models.ToolCall{ID: f.GetToolCallId(), Name: f.GetName(), Arguments: f.GetPayload()}
	case messages.FrameType_TOOL_RESULT:
		ev.Kind = EventToolResult
		ev.Result = models.ToolResult{CallID: f.GetToolCallId(), Name: f.GetName(), Content: f.GetPayload(),
			IsError: f.IsErrorResult(), FailureKind: f.GetMeta().GetFailureKind()}
	case messages.FrameType_META:
		if f.GetName() == models.MetaUsage {
			var u models.Usage
			if json.Unmarshal(f.GetPayload(), &u) == nil {
				ev.Kind, ev.Usage = EventUsage, u
			}
		}
	case messages.FrameType_ERROR:
		ev.Kind, ev.Text = EventError, f.GetText()
	}
	return ev
}
