package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/internal/prune"
	"github.com/polyweave/polyweave-go/messages"
)

// ErrStopped is wrapped by the error a [FailureHandler] gets, and carried by
// the ERROR frames that close open streams, when a duplex was stopped rather
// than failed.
var ErrStopped = errors.New("duplex stopped")

// ErrChildNameInUse is wrapped by the error [Context.Spawn] returns when
// a child of the same name is still this actor's, running or stopping: a
// name is free again once its child's [ChildStopped] has been received.
var ErrChildNameInUse = errors.New("a child of that name has not stopped (its ChildStopped has not been received)")

// StoppedKind is the failure kind (metadata failure_kind) of the ERROR
// frames that close a stopped duplex's open streams, and of those that
// refuse a call opened while it is stopping (its children still
// finishing), so that a reader can tell "stopped for good" from a failure
// without parsing the text. A call opened while the duplex restarts is
// refused without it, the duplex coming back, unless a stop is queued
// behind the call (see Context.Stop). It is tools.FailureStopped.
const StoppedKind = "stopped"

// FailedKind is the failure kind of the ERROR that answers the call
// whose frame failed a duplex when its supervisor resumes it (Resume
// directive): the call failed, and the duplex goes on with its state,
// neither restarted nor stopped. The text is the failure's. The call's
// work stops with it: the background work keyed by its stream id (see
// Context.Go) is cancelled, and the Logic gets a CANCEL of the stream,
// as from the caller, before the next message (what it emits on the
// stream in answer is dropped). A call answered alone among the calls
// its stream carries (see the package doc) has the ERROR and END carry
// its tool-call id, and the CANCEL too; the work keyed by the stream id
// runs on, and only what the Logic emits with the call's id is dropped.
const FailedKind = "failed"

// shell is the protoactor actor around a Logic: one per incarnation.
type shell struct {
	rt         *Runtime
	spec       Spec
	subscriber *actor.PID
	// up is the parent's mailbox when the subscriber is the parent: Emit
	// queues frames there with this actor's PID beside them (no envelope).
	up    *mailbox
	cell  *mailboxCell
	mb    *mailbox // this actor's own mailbox (from cell, at Started)
	logic Logic
	// obs observes this incarnation (see Spec.Observe), or is nil.
	obs FrameObserver
	// childRecv is logic's ChildFrameReceiver fast path, if it has one.
	childRecv ChildFrameReceiver

	ctx       actor.Context // valid during Receive only
	self      *actor.PID
	children  map[string]Ref // made by the first Spawn
	lastChild Ref            // the child the last child frame came from
	logger    *slog.Logger   // made by the first Logger call

	// open holds the streams that have seen a frame and no emitted END yet;
	// lastOpen caches the most recent one to keep the hot path free of
	// lookups.
	open     openStreams
	lastOpen string

	jobs    context.Context // cancelled when the incarnation ends; made by the first Go
	endJobs context.CancelFunc
	// calls holds the work of calls: the jobs started with a stream id
	// as their key (see Go), by stream, while some run.
	calls   map[string]*callWork
	timers  map[*time.Timer]struct{}
	failure error // the reason this incarnation is failing, if it is
	// failedCall is the stream and tool-call id of the input frame
	// whose delivery failed the incarnation, if a frame did: the call a
	// Resume answers (see resumed).
	failedCall streamCall
	// escalated are the children whose failure this actor's strategy
	// escalated, suspended until this actor's supervisor decides: a
	// Resume of this actor resumes them (see resumed); a restart or stop
	// stops them with it.
	escalated []escalatedChild
	finished  bool
	// answered holds the streams whose call the shell answered for good,
	// and whose caller's input has not ended yet: those the incarnation's
	// end closed (ERROR and END) before the caller's END came, those
	// opened after it and refused (see refuse), and the one a Resume
	// answered (see resumed); each with the answered call's tool-call id
	// (see openStreams.call). Their frames are the answered call's,
	// dropped, up to the caller's END, but a frame that opens a new call
	// (see closedCall.newCall), served or refused (see dropAnswered).
	// What the Logic emits on them is dropped (see Emit). Bounded, the
	// oldest forgotten (see closedCalls): a caller that never sends its
	// END leaves its stream here. Nil when there are none.
	// restarting: the incarnation ended for a restart, not a stop (see
	// refuse). terminated: protoactor's Stopped has come, the duplex's
	// watchers are told, and nothing more is emitted.
	answered *closedCalls
	// muted holds the streams whose call a Resume answered (see resumed)
	// and the Logic, which keeps its state, has not ended itself: what it
	// emits on them is the answered call's, dropped (see Emit), whether
	// or not the caller's END has come, until the Logic's own END of the
	// call (see mutedStream), a new call opened on the stream (see input)
	// or the incarnation's end. Bounded, the oldest forgotten (see
	// muteMax).
	muted bounded[string, mutedStream]
	// mutedCalls holds the calls a Resume answered alone, the other calls
	// of their stream going on (see resumed), that the Logic has not
	// ended itself: what it emits with such a call's tool-call id is the
	// answered call's, dropped, until the Logic's END of the call or of
	// the stream, the call's TOOL_CALL sent again or a new call reusing
	// its id once its arguments were complete (see input), or the
	// incarnation's end. What it emits on the stream for the other calls
	// goes out. Bounded, the oldest forgotten (see muteMax).
	mutedCalls bounded[streamCall, struct{}]
	// argsDone holds the calls whose caller's META tool_complete came,
	// the end of their arguments, up to a new call reusing the id on
	// the stream: a frame with such an id that opens a call (but an
	// argument chunk) is no rest of it but that new call (see input),
	// and the record of its answer notes it complete (see
	// noteAnswered). Bounded, the oldest forgotten (see muteMax).
	argsDone bounded[streamCall, struct{}]
	// closed holds the streams whose call an earlier incarnation answered
	// and whose caller's END has not come: their late frames are dropped
	// (see closedCalls). Nil when there are none, and for a persistent
	// duplex (or one that owns one: see Spec.Durable), which recovers
	// its calls.
	closed     *closedCalls
	restarting bool
	terminated bool

	durable *durableShell // set when spec.Persistence is (see durable.go)
	seq     int           // numbers given to the names of spawned duplexes (see Parent)
}

// failSignal carries Context.Fail's error through a panic.
type failSignal struct{ err error }

// Message types the shell sends itself.
type (
	asyncProgressMsg struct {
		owner *shell
		AsyncProgress
	}
	asyncDoneMsg struct {
		owner *shell
		work  *callWork // the call's work the job was of, if any (see Go)
		AsyncDone
	}
	timerMsg struct {
		owner *shell
		t     *time.Timer
		Timer
	}
)

func newShell(rt *Runtime, spec Spec, subscriber *actor.PID, cell *mailboxCell, up *mailbox) actor.Actor {
	s := &shell{rt: rt, spec: spec, subscriber: subscriber, cell: cell, up: up}
	if spec.Persistence != nil {
		return newDurableShell(s)
	}
	return s
}

// Receive implements actor.Actor.
func (s *shell) Receive(ctx actor.Context) {
	s.ctx = ctx
	switch m := ctx.Message().(type) {
	case *messages.Frame:
		// A child's frame carries the child in the mailbox entry; a frame
		// sent with protoactor's Request, in its envelope.
		sender := s.mb.from
		if sender == nil {
			sender = ctx.Sender()
		}
		s.receiveFrame(m, sender)
	case *asyncProgressMsg:
		if m.owner == s {
			s.deliver(m.AsyncProgress)
		}
	case *asyncDoneMsg:
		if m.owner == s {
			s.workDone(m.work)
			s.deliver(m.AsyncDone)
		}
	case *timerMsg:
		if m.owner == s {
			delete(s.timers, m.t)
			s.deliver(m.Timer)
		}
	case *spawnRequest:
		// A Parent's StartMux: the duplex is this actor's child, not one
		// of its Logic's (its frames go to its own subscriber). Not once
		// the incarnation that asked has ended: this actor may be
		// stopping, past stopping its children, and would wait forever for
		// a new one. Nor held for the next incarnation, as the runtime's
		// host holds a Start's while it restarts: the work that asked is
		// the ended incarnation's, cancelled (see Parent.StartMux).
		if s.finished || isClosed(m.gone) {
			m.reply <- spawnReply{err: ErrParentStopped}
			return
		}
		s.rt.spawnChild(ctx, m, &s.seq)
	case *actor.Started:
		s.begin(ctx)
		s.deliver(Started{})
	case *actor.Terminated:
		// A system message, so it may be handled before the child's last
		// frames, still queued: its end is queued after them (the child
		// queued them before it stopped), and delivered when taken.
		if child, ok := s.children[m.Who.GetId()]; ok && child.pid == m.Who && !s.finished {
			s.mb.postGone(m.Who)
		}
	case childGone:
		s.childGone(s.mb.from)
	case *actor.Restarting:
		// The restart is counted before the open streams get their ERROR
		// and END: whoever reads those and then the runtime's record (an
		// agent telling a restart that closed its attempt) finds it.
		s.rt.watch.ended(s, true)
		s.finish(s.failureOr(errors.New("restarted")))
		s.restarting = true
	case resumed:
		s.resumed()
	case stopQueued:
		// A stop waits behind what is queued, and wins over the
		// restart: the incarnation ends now, what comes before the stop
		// is refused (see late), as it is once the stop is taken.
		s.finish(s.failureOr(ErrStopped))
		s.restarting = false
	case *actor.Stopping:
		s.finish(s.failureOr(ErrStopped))
		s.restarting = false // stopped while restarting: for good now
		s.rt.watch.ended(s, false)
	case *injectedPanic:
		s.injected(m)
	case *actor.Stopped:
		s.terminated = true
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		s.deliver(m)
	}
}

// receiveFrame delivers a frame from sender: a child's frame to the
// Logic's child path, anything else as input. The mailbox calls it
// directly for the frames it queued itself (see mailbox.direct).
func (s *shell) receiveFrame(m *messages.Frame, sender *actor.PID) {
	if sender == nil {
		s.input(m)
		return
	}
	if sender != s.lastChild.pid { // the same child sends with the same *PID
		if !isChildID(sender.Id, s.self.Id) {
			s.input(m)
			return
		}
		child, ok := s.children[sender.Id]
		if !ok || child.pid != sender { // a named child of an earlier incarnation has the same id, not the same *PID
			return // from a child of an earlier incarnation: its stream was closed then
		}
		s.lastChild = child
	}
	s.deliverChild(s.lastChild, m)
}

// childGone delivers ChildStopped for child, whose frames were all
// delivered before. A child of an earlier incarnation of this actor, or
// one whose name a newer child took, is no child of this Logic's.
func (s *shell) childGone(child *actor.PID) {
	ref, ok := s.children[child.GetId()]
	if !ok || ref.pid != child {
		return
	}
	delete(s.children, child.Id)
	if s.lastChild.pid == child {
		s.lastChild = Ref{}
	}
	s.deliver(ChildStopped{Child: ref})
}

func (s *shell) begin(ctx actor.Context) {
	s.self = ctx.Self()
	s.rt.watch.started(s, ctx)
	s.mb = s.cell.mb
	s.mb.incarnations++ // a restart's incarnation is made (see mailbox.restarting)
	if prev := s.cell.last; prev != nil && !s.spec.Durable() {
		s.closed = inherit(prev)
	}
	s.cell.last = s
	// Frames skip protoactor's invocation (its metrics, receive timeout
	// and middleware, none of which a duplex uses) unless the system
	// records actor metrics, or the shell is a durable one's.
	if s.durable == nil && ctx.ActorSystem().Config.MetricsProvider == nil {
		s.mb.direct = s
	} else {
		s.mb.direct = nil
	}
	if s.logic = s.spec.New(); s.logic == nil {
		s.logic = LogicFunc(func(Context, any) {})
		s.failure = fmt.Errorf("spec %q: New returned a nil Logic", s.spec.Name)
		panic(s.failure)
	}
	s.childRecv, _ = s.logic.(ChildFrameReceiver)
	s.obs = nil
	if s.spec.Observe != nil {
		s.obs = s.spec.Observe()
	}
}

func (s *shell) failureOr(err error) error {
	if s.failure != nil {
		return s.failure
	}
	return err
}

// deliver runs the Logic, turning a panic into a recorded failure that
// protoactor's mailbox escalates to the supervisor.
func (s *shell) deliver(msg any) {
	if s.finished {
		return // the incarnation has ended: its children stopping is no news
	}
	defer func() {
		if r := recover(); r != nil {
			s.failure = s.asFailure(r)
			if f, ok := msg.(*messages.Frame); ok {
				// An input frame (a child's comes as a ChildFrame).
				s.failedCall = streamCall{f.GetStreamId(), f.GetToolCallId()}
			}
			panic(s.failure)
		}
	}()
	if s.obs != nil {
		s.observed(msg)
		return
	}
	s.logic.Receive(s, msg)
}

// observed delivers msg to the Logic through the observer.
func (s *shell) observed(msg any) {
	if s.obs.Received(s, msg) {
		s.logic.Receive(s, msg)
	}
	s.obs.Handled()
}

// resumed carries out a Resume of this incarnation, which keeps its
// Logic and state: the call whose frame failed it, if it is still open,
// is answered with an ERROR of failure kind [FailedKind] (the reason)
// and END, and its work stopped (see stopCall), before the Logic gets
// the next message; the children whose
// failure was escalated from here are resumed in turn, as the decision
// about this actor was also about their failure. A failure that no
// input frame caused (a timer, background work's end, a child's frame)
// is not a call's: the calls open stay the Logic's to answer. Nor is one
// a frame of a call the Logic ended caused (its late argument chunk, its
// caller's CANCEL, on a stream still open for others: see endedRest):
// that call has its answer, the others are the Logic's.
//
// The failed frame's tool-call id tells its call. When the stream
// carries other calls the runtime knows open (their frames came with
// other ids, or with none, and the Logic has not ended them: see
// openStreams), the
// Resume answers that call alone: its ERROR and END carry its id, the
// Logic gets a CANCEL of that call, and only what carries its id is
// dropped, the caller's and the Logic's (see mutedCalls and
// closedCall.shared); the other calls go on, and get their answers from
// the Logic. Otherwise the call is the stream's: the Resume answers the
// stream, its ERROR and END carrying the call's id when one is known.
func (s *shell) resumed() {
	if s.finished {
		return
	}
	s.rt.watch.resumed(s)
	failed := s.failedCall
	var answered ResumeAnswered
	stop := failed.stream != "" && s.failure != nil && s.open.has(failed.stream) &&
		!s.open.endedRest(failed.stream, failed.call)
	if stop {
		id := failed.stream
		shared := failed.call != "" && s.open.shares(id, failed.call)
		if !shared {
			// The stream's: its ERROR and END answer each of its calls.
			failed.call = s.open.sole(id)
		}
		if !s.open.inputEnded(id) {
			// The call's rest, up to its caller's END, is the answered
			// call's (see answered).
			if shared {
				s.noteAnswered(id, failed.call, true)
			} else {
				s.noteAnswered(id, s.open.call(id), false)
			}
		}
		// So is what the Logic, which keeps its state, emits on it
		// until it ends it, even after the caller's END (see muted).
		s.mute(id, failed.call, shared)
		f := messages.Error(id, s.failure.Error())
		f.ToolCallId = failed.call
		f.Meta = &messages.Metadata{FailureKind: FailedKind}
		s.emit(f)
		s.emit(endOf(id, failed.call))
		answered = ResumeAnswered{Stream: id, ToolCallID: failed.call, Alone: shared}
		if !shared {
			failed.call = ""
		}
	}
	s.failure, s.failedCall = nil, streamCall{}
	resumeEscalated(s.escalated, s.rt.system.ProcessRegistry)
	s.escalated = nil
	if stop {
		s.stopCall(failed, answered)
	}
}

// mute drops what the Logic emits of the call on stream a Resume
// answered: the call's alone when shared, the stream's otherwise (see
// muted, mutedCalls).
func (s *shell) mute(stream, call string, shared bool) {
	if shared {
		s.mutedCalls.add(streamCall{stream, call}, struct{}{})
		return
	}
	s.muted.add(stream, mutedStream{call: call, several: s.open.several(stream)})
}

// stopCall stops the work of c, the call a Resume answered as a says:
// the Logic is told of the answer (a), then gets a CANCEL of the call,
// as from its caller, to stop the rest (its emits on it are dropped: see
// muted). A call of a stream of its own (c.call
// empty) is the stream's: the jobs started with the stream's id as their
// key are cancelled, and the CANCEL is of the stream. A call answered
// alone among its stream's calls gets a CANCEL with its tool-call id, and
// the jobs keyed by the stream are left running: they may be the other
// calls'. A failure there is a new one, of no call: the runtime's CANCEL
// is none of the stream's calls (a Resume of it answers none of them).
func (s *shell) stopCall(c streamCall, a ResumeAnswered) {
	if w := s.calls[c.stream]; w != nil && c.call == "" {
		w.cancel()
		delete(s.calls, c.stream)
	}
	defer func() {
		if r := recover(); r != nil {
			s.failedCall = streamCall{}
			panic(r)
		}
	}()
	s.deliver(a)
	s.deliver(messages.Cancel(c.stream, c.call))
}

// streamCall names a call: its stream and its tool-call id.
type streamCall struct{ stream, call string }

// mutedStream is what the Logic's emits on a stream a Resume answered
// are dropped until (see shell.muted): its END of the stream (one with
// no tool-call id), or of the stream's one call (with that call's id)
// when the stream carried a single call. A stream that carried several
// calls is muted until an END of the stream: the Logic may end each of
// its calls (a tool actor answers a CANCEL so), all answered.
type mutedStream struct {
	call    string // the stream's call's tool-call id, if one is known
	several bool   // the stream carried several calls
}

// ends reports whether f, an END the Logic emits on the muted stream,
// ends what it owes the stream.
func (m mutedStream) ends(f *messages.Frame) bool {
	id := f.GetToolCallId()
	return id == "" || !m.several && (m.call == "" || id == m.call)
}

// endOf is the END of the call of tool-call id call on stream (of the
// stream when call is empty).
func endOf(stream, call string) *messages.Frame {
	f := messages.End(stream)
	f.ToolCallId = call
	return f
}

// callWork is the work of a call (see shell.calls): the context its
// jobs' contexts derive from, and how many run.
type callWork struct {
	stream string
	ctx    context.Context
	cancel context.CancelFunc
	n      int
}

// callWorkOf returns the work of the call on stream, made if none runs.
func (s *shell) callWorkOf(stream string, jobs context.Context) *callWork {
	if w := s.calls[stream]; w != nil {
		return w
	}
	w := &callWork{stream: stream}
	w.ctx, w.cancel = context.WithCancel(jobs)
	if s.calls == nil {
		s.calls = make(map[string]*callWork)
	}
	s.calls[stream] = w
	return w
}

// workDone counts the end of a job of w (nil: of no call's work).
func (s *shell) workDone(w *callWork) {
	if w == nil {
		return
	}
	if w.n--; w.n > 0 {
		return
	}
	w.cancel()
	if s.calls[w.stream] == w {
		delete(s.calls, w.stream)
	}
}

// keepEscalated implements escalationKeeper.
func (s *shell) keepEscalated(c escalatedChild) { s.escalated = append(s.escalated, c) }

// deliverChild delivers a child's frame, through the ChildFrameReceiver
// fast path when the Logic has one (it saves boxing a ChildFrame).
func (s *shell) deliverChild(child Ref, f *messages.Frame) {
	r := s.childRecv
	if r == nil {
		s.deliver(ChildFrame{Child: child, Frame: f})
		return
	}
	if s.finished {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			s.failure = s.asFailure(p)
			panic(s.failure)
		}
	}()
	r.ReceiveChildFrame(s, child, f)
	if s.obs != nil {
		s.obs.Handled()
	}
}

func (s *shell) asFailure(r any) error {
	if f, ok := r.(failSignal); ok {
		return f.err
	}
	return newPanicError(s.self.GetId(), r)
}

// finish ends the incarnation: the Logic answers for its open work, the
// streams still open are closed with ERROR and END, background work is
// cancelled and timers stopped.
func (s *shell) finish(reason error) {
	if s.finished {
		return
	}
	// Ended, even if it never had a Logic (its Spec's New panicked):
	// what a stopping actor takes after this is refused or dropped.
	s.finished = true
	if s.logic == nil {
		return
	}
	if s.endJobs != nil {
		s.endJobs()
	}
	for t := range s.timers {
		t.Stop()
	}
	if h, ok := s.logic.(FailureHandler); ok {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.Logger().Error("failure handler panicked", slog.Any("panic", r))
				}
			}()
			h.OnFailure(s, reason)
		}()
	}
	if s.obs != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.Logger().Error("frame observer panicked", slog.Any("panic", r))
				}
			}()
			s.obs.Ended(reason)
		}()
	}
	if s.open.len() == 0 {
		return
	}
	streams := s.open.all()
	slices.Sort(streams)
	for _, id := range streams {
		if !s.open.inputEnded(id) {
			s.noteAnswered(id, s.open.call(id), false)
		}
	}
	stopped := errors.Is(reason, ErrStopped)
	var buf [1]string
	for _, id := range streams {
		if s.spec.Durable() {
			// It recovers its calls: the stream is closed towards its
			// consumer, with the id of its call when it has one.
			s.closeCall(id, s.open.sole(id), reason, stopped)
			continue
		}
		// Each call of the stream the runtime knows by its tool-call id
		// gets an ERROR and END with that id; a call of no id, or a
		// stream of no call known, a pair with none, after the others.
		calls, anon := s.open.answers(id, buf[:0])
		for _, call := range calls {
			s.closeCall(id, call, reason, stopped)
		}
		if anon {
			s.closeCall(id, "", reason, stopped)
		}
	}
}

// closeCall answers the call of tool-call id call on stream (the
// stream's call of no id when call is empty) with an ERROR of reason,
// of failure kind StoppedKind when the duplex stopped, and END.
func (s *shell) closeCall(stream, call string, reason error, stopped bool) {
	f := messages.Error(stream, reason.Error())
	f.ToolCallId = call
	if stopped {
		f.Meta = &messages.Metadata{FailureKind: StoppedKind}
	}
	s.emit(f)
	s.emit(endOf(stream, call))
}

// input delivers a frame written into the sink. A frame that asks for
// work opens a call on its stream, if none is open (see opensCall), but
// an argument chunk of a call the Logic ended (see continues):
// answers (TOOL_RESULT), control frames (CANCEL, ABORT, TICK), END and
// META do not: a duplex owes nothing for them, so a stream they arrive on
// after its END stays closed. The caller's END ends its
// input: the open stream notes it (see late), as it notes the tool-call
// id of the call (see openStreams.call).
//
// Once the incarnation has ended (its duplex restarting or stopping, its
// children still finishing), the Logic gets no frame (see late).
func (s *shell) input(f *messages.Frame) {
	if s.finished {
		s.late(f)
		return
	}
	if f.IsToolComplete() && f.GetToolCallId() != "" {
		// The end of a call's arguments, dropped or not: a frame with
		// its id that opens a call is no rest of it (see argsDone).
		s.argsDone.add(streamCall{f.GetStreamId(), f.GetToolCallId()}, struct{}{})
	}
	if s.answered != nil && s.dropAnswered(f) {
		return // the rest of a call a Resume answered
	}
	if s.closed != nil && s.dropClosed(f) {
		return // a late frame of a call an earlier incarnation answered
	}
	switch t := f.GetType(); {
	case t == messages.FrameType_END:
		s.open.endInput(f.GetStreamId())
	case opensCall(t):
		if s.argsDone.len() > 0 && !f.IsToolArgChunk() {
			if k := (streamCall{f.GetStreamId(), f.GetToolCallId()}); k.call != "" {
				if _, ok := s.argsDone.get(k); ok {
					// A new call reusing the id of one whose arguments
					// were complete: not the rest of that one, if the
					// Logic ended it (see restOfEnded).
					s.argsDone.remove(k)
					s.open.argsComplete(k.stream, k.call)
				}
			}
		}
		if !s.spec.Durable() && s.open.restOfEnded(f) {
			// The rest of a call the Logic ended (see restOfEnded): it
			// had its answer, and is not open again.
			break
		}
		if s.muted.len() > 0 {
			// A new call on the stream: what the Logic emits on it now
			// is this call's (see muted).
			s.muted.remove(f.GetStreamId())
		}
		if s.mutedCalls.len() > 0 && !f.IsToolArgChunk() {
			// The answered call sent again, or a new call reusing its
			// id, its arguments complete (see mutedCalls): the rest of
			// the answered call was dropped above.
			s.mutedCalls.remove(streamCall{f.GetStreamId(), f.GetToolCallId()})
		}
		s.noteOpen(f.GetStreamId())
		s.open.noteCall(f.GetStreamId(), f.GetToolCallId())
	}
	s.deliver(f)
}

// late takes a frame written into the sink after the incarnation ended.
// A call is the frames of its stream up to the caller's END: the frames
// of a call answered since (see answered) are dropped, and its END ends
// it. Otherwise a frame that opens a call (stream ids are reused, call
// after call), or a new call on the stream of an answered one (see
// closedCall.newCall), is refused. Frames that open nothing (a META
// among them: an approval decision after its call's END) are dropped: a
// duplex owes nothing for them. So are the late frames of a call an
// earlier incarnation answered (see closedCalls), as this one dropped
// them while it ran. An argument chunk is never refused: it opens no
// call (its call's TOOL_CALL came before it), and its call, open when
// the incarnation ended, was answered then, or refused, or closed by an
// earlier incarnation; so it is dropped also when the record of its
// stream was forgotten (see closedCalls), rather than answered again.
func (s *shell) late(f *messages.Frame) {
	// The records of f's stream, which a new call ends: the refused
	// call's record keeps their calls, so that their rest still in
	// flight is dropped, not refused as another new call (see refuse).
	var prev [2]closedCall
	prev[0], _ = s.closed.get(f.GetStreamId())
	prev[1], _ = s.answered.get(f.GetStreamId())
	if s.closed != nil && s.dropClosed(f) {
		return
	}
	if !s.dropAnswered(f) && opensCall(f.GetType()) && !f.IsToolArgChunk() {
		s.refuse(f, prev[:])
	}
}

// dropAnswered reports whether f is a frame of a call the shell answered
// (see answered), to be dropped. The caller's END ends the call, and the
// record; so does a frame that opens a new call (see
// closedCall.newCall), which is not dropped, but for the answered
// calls' ids: their rest, which their caller sent before it had their
// answer, may still come after it (see closedCall.served).
func (s *shell) dropAnswered(f *messages.Frame) bool {
	id := f.GetStreamId()
	rec, ok := s.answered.get(id)
	if !ok {
		return false
	}
	if f.IsToolComplete() {
		// Not on the argument chunks' path: a record is copied.
		if next, ok := rec.completes(f); ok {
			rec = next
			s.answered.addRecord(id, rec)
		}
	}
	if rest, ends, kept := rec.keptRest(f); kept {
		// Its rest is what carries its calls' ids; the caller's END,
		// of the stream's other calls too, is delivered.
		if ends {
			s.endAnswered(id)
		}
		return rest
	}
	switch {
	case f.GetType() == messages.FrameType_END:
	case rec.newCall(f):
		// Served: the rest of the answered calls, sent before their
		// answer, may still come after it (see closedCall.afterNewCall).
		if next, ok := rec.afterNewCall(f); ok {
			s.answered.addRecord(id, next)
			return false
		}
		s.endAnswered(id)
		return false
	default:
		return true
	}
	s.endAnswered(id)
	return true
}

// endAnswered ends the record of the call answered on stream id.
func (s *shell) endAnswered(id string) {
	if s.answered.remove(id); s.answered.len() == 0 {
		s.answered = nil
	}
}

// answeredCall is the tool-call id of a call the runtime answered (see
// shell.answered and closedCalls): the last one its caller's frames that
// opened or continued it carried, or "" when none carried one.
type answeredCall string

// newCall reports whether f, a frame on the stream of the answered call
// of r that its caller sent before the call's END, opens a new call
// rather than being the answered call's rest: a TOOL_CALL (a call's
// first frame, sent once: one with the call's id is that call sent
// again), or a frame that opens a call (see opensCall) and carries a
// tool-call id other than the call's, and than those of the stream's
// other calls answered with it or ended by the Logic before (see
// closedCall.others: a PARAM with one of theirs, sent before the
// answer, is their rest). A frame that carries no id cannot be told from the answered
// call's rest by its id: it is the answered call's up to the caller's
// END (a call whose frames carry no id, PARAMs and TEXT, ends with its
// caller's END), or up to a new call, which ends the record. Nor is a chunk of a streaming call's arguments a new
// call, whatever its id: its call begins with its TOOL_CALL, which, sent
// after the answer, would have been a new call (ending the record); so
// it is of a call begun before the answer, on the stream then (streaming
// calls interleaved on a stream, of which c is the last one noted). A
// DESCRIBE is a new call, with or without an id: it is a whole call in
// one frame, which its caller ends with no END, so it is never the rest
// of another.
func (r closedCall) newCall(f *messages.Frame) bool {
	t := f.GetType()
	if t == messages.FrameType_DESCRIBE {
		return true
	}
	if !opensCall(t) || f.IsToolArgChunk() {
		return false
	}
	id := f.GetToolCallId()
	return id != "" && (t == messages.FrameType_TOOL_CALL || r.reuses(f) || !r.holds(id))
}

// sharedRest reports, of f, a frame on the stream of r, the record of
// the call a Resume answered alone among its stream's calls (see
// closedCall.shared), whether it is the answered call's rest, to be
// dropped: one that carries its id (or the id of one of r's others, the
// calls of a record r replaced: see noteAnswered) but its TOOL_CALL (the
// call sent again), a frame that opens a call with the id of one whose
// arguments were complete (see closedCall.complete) or a DESCRIBE (a
// whole call in one frame), each a new call; and whether it ends r:
// such a new call, or the caller's END of the stream. The stream's other frames are its other calls'.
func (r closedCall) sharedRest(f *messages.Frame) (rest, ends bool) {
	switch t := f.GetType(); {
	case t == messages.FrameType_END:
		return false, true
	case !r.holds(f.GetToolCallId()):
		return false, false
	case t == messages.FrameType_TOOL_CALL || t == messages.FrameType_DESCRIBE || r.reuses(f):
		return false, true
	}
	return true, false
}

// dropClosed reports whether f is a late frame of a call an earlier
// incarnation answered, to be dropped (see closedCalls).
func (s *shell) dropClosed(f *messages.Frame) bool {
	drop := s.closed.drop(f, &s.open)
	if s.closed.len() == 0 {
		s.closed = nil
	}
	return drop
}

// noteAnswered records that the shell answered the call on stream, of
// tool-call id call, whose caller's input has not ended (see answered):
// alone among the stream's calls when shared (see closedCall); else with
// the stream's other calls known by their ids, answered with it or ended
// by the Logic. Either way it keeps the calls of the records of the
// stream it replaces (prev, and those of the stream in answered and
// closed: see closedCall.others), whose rest may still come.
func (s *shell) noteAnswered(stream, call string, shared bool, prev ...closedCall) {
	if s.answered == nil {
		s.answered = &closedCalls{}
	}
	rec := closedCall{call: answeredCall(call), shared: shared}
	if !shared {
		rec.others = s.open.others(stream, call)
	}
	// The records it replaces: the calls a Resume or an earlier
	// incarnation answered before a new call was served there (see
	// closedCall.afterNewCall), whose rest may still come.
	was, _ := s.answered.get(stream)
	before, _ := s.closed.get(stream)
	replaced := append(prev, was, before)
	for _, p := range replaced {
		rec.others = p.carried(rec.others, call)
	}
	// Of its calls, those whose arguments were complete have no rest
	// that opens a call (see closedCall.complete): those whose
	// caller's tool_complete came before the answer (see argsDone), and
	// those of the records it replaces.
	if s.argsDone.len() > 0 {
		for i := range len(rec.others) + 1 {
			c := call
			if i < len(rec.others) {
				c = rec.others[i]
			}
			if _, ok := s.argsDone.get(streamCall{stream, c}); ok && c != "" && !slices.Contains(rec.complete, c) {
				rec.complete = append(rec.complete, c)
			}
		}
	}
	for _, p := range replaced {
		for _, c := range p.complete {
			if c != call && slices.Contains(rec.others, c) && !slices.Contains(rec.complete, c) {
				rec.complete = append(rec.complete, c)
			}
		}
	}
	s.answered.addRecord(stream, rec)
}

// refuse answers f, a frame that opened its stream, a new call, after the
// incarnation ended: the Logic will not run it, so the stream gets ERROR
// and END, both with f's tool-call id (the refused call's), at once
// rather than when the duplex has stopped, and only once for the frames
// of the call (see late). The record of the refused call keeps, among
// its others (see closedCall.others), the calls of prev, the records of
// the stream that f ended: a frame of theirs that their caller sent
// before it had their answer, coming after f, is their rest, dropped,
// not a new call refused (a second answer of theirs). The ERROR has
// failure kind StoppedKind while the duplex stops; while it restarts it has none, as
// the ERROR that closed a call open at the restart: the duplex comes
// back, unless a stop written into it is queued (a restart for a
// sibling's failure that waits for this duplex's children to stop, then
// a Context.Stop): that stop is taken before the restart completes, and
// the duplex does not come back, so the call is refused as by a
// stopping duplex. Once the duplex has stopped, its subscriber knows (a Conn's or
// a Mux's Recv returns ErrDuplexStopped, a parent gets ChildStopped) and
// may be gone: nothing is emitted then.
func (s *shell) refuse(f *messages.Frame, prev []closedCall) {
	stream := f.GetStreamId()
	if s.terminated || stream == "" {
		return
	}
	call := f.GetToolCallId()
	s.noteAnswered(stream, call, false, prev...)
	e := messages.Error(stream, stoppingText)
	e.ToolCallId = call
	if s.restarting && s.mb.stops.Load() == 0 {
		e.Text = restartingText
	} else {
		e.Meta = &messages.Metadata{FailureKind: StoppedKind}
	}
	s.emit(e)
	s.emit(endOf(stream, call))
}

// OpensStream reports whether a frame of type t written into a duplex's
// sink asks for work on its stream: the duplex then owes the stream an
// END (emitted by its Logic, or ERROR and END when its incarnation ends).
// Answers (TOOL_RESULT), control frames (CANCEL, ABORT, TICK), ERROR and
// END ask for nothing. A Logic that closes streams itself once it owes
// them nothing more (a call runner) uses it to know which streams it must
// close. The runtime counts a META as opening no call of its own: it is
// about a call, and may come after the call's END (an approval decision),
// so a stream with no call open gets no ERROR and END for one when the
// duplex fails, unless its Logic answered it with more than META frames.
func OpensStream(t messages.FrameType) bool {
	switch t {
	case messages.FrameType_TOOL_RESULT, messages.FrameType_END, messages.FrameType_CANCEL,
		messages.FrameType_ABORT, messages.FrameType_TICK, messages.FrameType_ERROR:
		return false
	}
	return true
}

// opensCall reports whether a frame of type t, written into a duplex's
// sink or emitted by it on a stream with no call open, opens a call: the
// frames OpensStream reports, but META. A META is about a call (its
// approval decisions, the end of a tool call's arguments, a restore),
// and may come after the call's END: it opens none, so the duplex owes
// no END for it (a Logic that answers one with a META, as the tools loop
// answers a decision it cannot apply, leaves no stream open).
func opensCall(t messages.FrameType) bool {
	return t != messages.FrameType_META && OpensStream(t)
}

func (s *shell) noteOpen(stream string) {
	if stream == "" || stream == s.lastOpen {
		return
	}
	s.open.add(stream)
	s.lastOpen = stream
}

// isChildID reports whether id names a child of the actor named parent
// (its id is the parent's, a slash, and the child's name).
func isChildID(id, parent string) bool {
	return len(id) > len(parent) && id[len(parent)] == '/' && id[:len(parent)] == parent
}

// openStreams is the set of streams a shell owes an END, each with
// whether its caller's input has ended (its END came) and the tool-call
// id of its call (see call). A duplex has one or two open at once, most
// of the time: they are kept in the shell itself, without a map's two
// allocations and hashing; more go to a map.
//
// A stream may carry several calls at once (a dispatcher's calls of one
// model response, on a tool actor): once a frame of a call with another
// id than the one noted comes while the stream is open, its calls are
// kept too (see noteCall), and the Logic's END with one of their ids
// ends that call alone, the stream staying open while others are (see
// endCall); a second END of it ends nothing, and its late frames open
// it no more (see endedCall). An END without an id ends the stream. A call whose frames
// carry no id is told from the others by that: a stream that carries
// one beside a call with an id carries several calls (see several),
// the Logic's END with the id of the other call ends that one alone,
// and a restart or stop, or a Resume for the other call's frame,
// answers each apart (see answers, shares).
//
// A caller that never ends its streams (a model that writes its text,
// of no id, beside its tool calls, and sends no END) leaves a stream
// open once the Logic has ended its calls by their ids, for the frames
// of no id beside them: the stream is quiet (see quiet). Of the quiet
// streams past the first few, only the openQuiet opened last are sure
// to be kept (see prune): a long-lived duplex does not grow its memory
// without end. A stream forgotten is closed to the runtime: a restart
// or stop answers nothing on it, and a later frame on it is a new
// stream (one that opens a call opens it again; after the incarnation's
// end, it is refused as any new call is). A stream with a call known by
// its id still open, or that carries a call of no id and none the Logic
// ended by its id (a model's prompt), is never forgotten: its call gets
// its answer.
type openStreams struct {
	few   [openInline]string
	ended [openInline]bool     // ended[i]: few[i]'s caller sent its END
	calls [openInline]string   // calls[i]: few[i]'s call's tool-call id
	multi [openInline][]string // multi[i]: few[i]'s calls, when several
	anon  [openInline]bool     // anon[i]: few[i] carries a call of no id
	spent [openInline]bool     // spent[i]: the Logic ended a call of few[i] by its id
	done  [openInline][]string // done[i]: the calls of few[i] the Logic ended by their ids (see endedCall)
	n     int                  // few[:n] are open
	more  map[string]openState
	// adds counts the streams that went to more, which orders them;
	// limit is the size past which more is pruned (see prune), zero
	// until it first is.
	adds  uint64
	limit int
	// spare is a calls list no stream holds any more, kept for the next
	// stream that carries several calls; spareDone one of ended calls,
	// for the next stream whose Logic ends a call by its id.
	spare, spareDone []string
	// closedBy are the latest closedByMax streams an END with a
	// tool-call id closed, each with that id (see closing), the next
	// to be replaced at closedByNext.
	closedBy     [closedByMax]streamCall
	closedByNext int
}

// closedByMax is how many of the streams closed by the END of a call
// (see openStreams.closing) a shell keeps in mind: a Logic that ends a
// call twice does so at once, or soon after.
const closedByMax = 16

// openState is what openStreams keeps of a stream past the first few.
type openState struct {
	call  string   // its call's tool-call id
	multi []string // its calls, when several
	done  []string // the calls the Logic ended by their ids (see endedCall)
	order uint64   // openStreams.adds when it was opened
	ended bool     // its caller sent its END
	anon  bool     // it carries a call of no id
	spent bool     // the Logic ended a call of it by its id
}

// openInline is how many open streams a shell keeps without a map.
const openInline = 2

// endedMax is how many of the calls the Logic ended by their ids an open
// stream keeps (see endedCall), the oldest forgotten: a late frame of
// one forgotten, but an argument chunk, opens it again. A second END of
// one forgotten ends nothing all the same (see endCall).
const endedMax = 16

// openQuiet is how many quiet streams openStreams keeps, past its
// inline room, when it is pruned; it is pruned when openQuiet/4 more
// streams have come.
const openQuiet = closedMax

func (o *openStreams) add(id string) {
	for _, f := range o.few[:o.n] {
		if f == id {
			return
		}
	}
	if _, ok := o.more[id]; ok {
		return
	}
	if o.n < len(o.few) {
		o.few[o.n], o.ended[o.n], o.calls[o.n], o.multi[o.n], o.anon[o.n], o.spent[o.n] = id, false, "", nil, false, false
		o.done[o.n] = nil
		o.n++
		return
	}
	if o.more == nil {
		o.more = make(map[string]openState)
	}
	o.adds++
	o.more[id] = openState{order: o.adds}
	if len(o.more) > max(o.limit, openQuiet+openQuiet/4) {
		o.prune()
	}
}

// quiet reports whether a stream whose call noted is call, of several
// calls when multi is not empty, that carries a call of no id when anon
// and of which the Logic ended a call by its id when spent, may be
// forgotten: it has no call known by its id open, and its frames of no
// id, if any, came beside calls the Logic ended (see openStreams).
func quiet(call string, multi []string, anon, spent bool) bool {
	return call == "" && len(multi) == 0 && (spent || !anon)
}

// prune forgets, of the quiet streams past the inline room, all but the
// openQuiet opened last (see openStreams). It runs again once
// openQuiet/4 more streams are kept, so that opening a stream costs the
// pruning a constant time on average; it allocates only then.
func (o *openStreams) prune() {
	prune.Oldest(o.more, openQuiet, func(_ string, st openState) bool { return quiet(st.call, st.multi, st.anon, st.spent) },
		func(st openState) uint64 { return st.order })
	o.limit = len(o.more) + openQuiet/4
}

// remove closes id, and reports whether it was open.
func (o *openStreams) remove(id string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			o.keep(o.multi[i], &o.spare)
			o.keep(o.done[i], &o.spareDone)
			o.n--
			o.few[i], o.few[o.n] = o.few[o.n], ""
			o.ended[i], o.ended[o.n] = o.ended[o.n], false
			o.calls[i], o.calls[o.n] = o.calls[o.n], ""
			o.multi[i], o.multi[o.n] = o.multi[o.n], nil
			o.anon[i], o.anon[o.n] = o.anon[o.n], false
			o.spent[i], o.spent[o.n] = o.spent[o.n], false
			o.done[i], o.done[o.n] = o.done[o.n], nil
			return true
		}
	}
	st, ok := o.more[id]
	if ok {
		o.keep(st.multi, &o.spare)
		o.keep(st.done, &o.spareDone)
		delete(o.more, id)
	}
	return ok
}

// keep keeps m, a calls list no stream holds any more, in spare for
// reuse, if it is the larger.
func (o *openStreams) keep(m []string, spare *[]string) {
	if cap(m) > cap(*spare) {
		clear(m[:cap(m)])
		*spare = m[:0]
	}
}

// endInput notes that the caller of id, if it is open, sent its END.
func (o *openStreams) endInput(id string) {
	for i, f := range o.few[:o.n] {
		if f == id {
			o.ended[i] = true
			return
		}
	}
	if st, ok := o.more[id]; ok {
		st.ended = true
		o.more[id] = st
	}
}

// inputEnded reports whether id is open and its caller sent its END.
func (o *openStreams) inputEnded(id string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			return o.ended[i]
		}
	}
	return o.more[id].ended
}

// noteCall notes call, the tool-call id of a frame that opens or
// continues the call on id (see opensCall), as that call's, if id is
// open: the last one noted is the call's (see answeredCall). A call other
// than the one noted is another call of the stream: its calls are kept
// from then on (see openStreams). A frame of no id is of a call of no id
// (see several). A call the Logic ended (see endedCall) noted with its id
// is open again.
func (o *openStreams) noteCall(id, call string) {
	for i, f := range o.few[:o.n] {
		if f == id {
			if call == "" {
				o.anon[i] = true
				return
			}
			if prev := o.calls[i]; prev != call {
				// The call noted is never among the ended (see
				// endCall): a chunk of it, the hot path, looks no
				// further.
				if len(o.done[i]) > 0 {
					o.done[i] = reopened(o.done[i], call)
				}
				if prev != "" {
					o.multi[i] = o.joined(o.multi[i], prev, call)
				}
				o.calls[i] = call
			}
			return
		}
	}
	st, ok := o.more[id]
	switch {
	case !ok:
	case call == "":
		if !st.anon {
			st.anon = true
			o.more[id] = st
		}
	case st.call != call:
		st.done = reopened(st.done, call)
		if st.call != "" {
			st.multi = o.joined(st.multi, st.call, call)
		}
		st.call = call
		o.more[id] = st
	}
}

// reopened returns done, the calls of a stream the Logic ended by their
// ids, without call, noted open again (a TOOL_CALL with its id: the call
// sent again).
func reopened(done []string, call string) []string {
	if i := slices.Index(done, call); i >= 0 {
		return slices.Delete(done, i, i+1)
	}
	return done
}

// others returns the tool-call ids of the calls of id, open, but call:
// those it carries and those the Logic ended by their ids (see
// endedCall); nil when there are none, as for a stream of one call.
func (o *openStreams) others(id, call string) []string {
	st, ok := o.get(id)
	if !ok || len(st.multi) == 0 && len(st.done) == 0 {
		return nil
	}
	out := make([]string, 0, len(st.multi)+len(st.done))
	for _, calls := range [...][]string{st.multi, st.done} {
		for _, c := range calls {
			if c != call && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// endedCall reports whether the Logic ended the call of tool-call id
// call on id, open, by its id, and the call is not open again since
// (see reopened): a frame with its id is the call's rest (see
// restOfEnded). A second END of it, as of one no longer kept, ends none
// of the stream's other calls (see endCall).
func (o *openStreams) endedCall(id, call string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			return len(o.done[i]) > 0 && slices.Contains(o.done[i], call)
		}
	}
	return len(o.more) > 0 && slices.Contains(o.more[id].done, call)
}

// argsComplete forgets that the Logic ended the call of tool-call id
// call on id (see endedCall), if it did, once a frame with its id opens
// a call after the caller's META tool_complete of it, the end of its
// arguments (see shell.argsDone): no rest of it, but a new call reusing
// the id (models number the calls of each response afresh), served.
func (o *openStreams) argsComplete(id, call string) {
	if call == "" {
		return
	}
	for i, f := range o.few[:o.n] {
		if f == id {
			if j := slices.Index(o.done[i], call); j >= 0 {
				o.done[i] = slices.Delete(o.done[i], j, j+1)
			}
			return
		}
	}
	if st, ok := o.more[id]; ok {
		if j := slices.Index(st.done, call); j >= 0 {
			st.done = slices.Delete(st.done, j, j+1)
			o.more[id] = st
		}
	}
}

// restOfEnded reports whether f, a frame that opens a call written into
// the duplex, is the rest of a call the Logic ended, on its way, and
// opens no call: an argument chunk of a call its stream does not hold
// (see continues), or a frame with the tool-call id of a call the Logic
// ended on the stream (see endedCall) but a TOOL_CALL or a DESCRIBE,
// which begin a call (that call sent again, a new one: models number
// the calls of each response afresh, call_0, call_1...). A frame with an
// id the stream never carried is a new call.
func (o *openStreams) restOfEnded(f *messages.Frame) bool {
	id, call := f.GetStreamId(), f.GetToolCallId()
	if f.IsToolArgChunk() {
		return !o.continues(id, call)
	}
	t := f.GetType()
	return call != "" && t != messages.FrameType_TOOL_CALL && t != messages.FrameType_DESCRIBE && o.endedCall(id, call)
}

// endedRest reports whether a frame of tool-call id call on id, open,
// is of a call the Logic ended by its id: the stream does not hold call,
// and the Logic ended calls of it by their ids (see restOfEnded; also
// one of those the stream no longer keeps, past endedMax). Its call has
// its answer.
func (o *openStreams) endedRest(id, call string) bool {
	st, ok := o.get(id)
	return ok && st.spent && !heldCall(call, st.call, st.multi, true)
}

// continues reports whether an argument chunk of tool-call id call on
// id is of a call id holds open: id is open, and call is one of its
// calls noted, or carries no id, or id has no call noted by its id and
// the Logic ended none (a streaming call whose TOOL_CALL carried no id).
// A chunk comes after its call's TOOL_CALL, which opened the call: one
// of a call the stream does not hold is of a call the Logic ended (by
// its id, or the stream with it), still on its way; noted, it would
// open that call again, for a restart or stop to answer a second time.
//
// It runs for every argument chunk, the streaming hot path: it reads
// the stream's state in place, copying none of it.
func (o *openStreams) continues(id, call string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			return heldCall(call, o.calls[i], o.multi[i], o.spent[i])
		}
	}
	if len(o.more) == 0 {
		return false
	}
	st, ok := o.more[id]
	return ok && heldCall(call, st.call, st.multi, st.spent)
}

// get returns what o keeps of id (an inline stream's, gathered), and
// whether id is open.
func (o *openStreams) get(id string) (openState, bool) {
	for i, f := range o.few[:o.n] {
		if f == id {
			return openState{call: o.calls[i], multi: o.multi[i], done: o.done[i],
				ended: o.ended[i], anon: o.anon[i], spent: o.spent[i]}, true
		}
	}
	st, ok := o.more[id]
	return st, ok
}

// heldCall is continues for an open stream whose call noted is noted,
// whose calls are multi (when several) and of which the Logic ended a
// call by its id when spent.
func heldCall(call, noted string, multi []string, spent bool) bool {
	return call == "" || call == noted || noted == "" && len(multi) == 0 && !spent ||
		slices.Contains(multi, call)
}

// joined returns m, a stream's calls (none kept yet when empty), with
// prev, its call noted, and call.
func (o *openStreams) joined(m []string, prev, call string) []string {
	if len(m) == 0 {
		m, o.spare = append(o.spare, prev), nil
	}
	if !slices.Contains(m, call) {
		m = append(m, call)
	}
	return m
}

// endCall ends the call of tool-call id call on id, when id carries it
// among other calls, and reports whether the stream stays open for its
// other calls: it ended the call, or the stream holds calls (see holds)
// and call is none of them, so that this END ends nothing: a second END
// of a call the Logic ended (one the stream keeps, see endedCall, or one
// it no longer keeps, past endedMax), or an END with an id the stream
// never carried (a Logic's answer to a frame of no call the runtime
// knows, such as a late argument chunk of a call it ended), which
// nothing tells from the former. The stream's calls still open get
// their answers, from the Logic or from a restart, stop or Resume. It
// reports false, leaving the stream as it was, when the END is the
// stream's: its one call's, or one of a stream that holds no call (the
// Logic opened it with its own frames).
func (o *openStreams) endCall(id, call string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			var ok bool
			o.multi[i], o.calls[i], ok = o.without(o.multi[i], o.calls[i], call, o.anon[i])
			if ok {
				o.spent[i] = true
				o.done[i] = o.ending(o.done[i], call)
			}
			return ok || call != o.calls[i] && holdsOther(o.calls[i], o.anon[i], o.spent[i])
		}
	}
	st, found := o.more[id]
	if !found {
		return false
	}
	var ok bool
	if st.multi, st.call, ok = o.without(st.multi, st.call, call, st.anon); ok {
		st.spent = true
		st.done = o.ending(st.done, call)
		o.more[id] = st
	}
	return ok || call != st.call && holdsOther(st.call, st.anon, st.spent)
}

// holdsOther reports whether the END of a call a stream does not hold
// (see endCall) leaves it open: the stream's call noted is noted, and
// it carries a call of no id when anon, and the Logic ended a call of
// it by its id when spent. So it does when the stream holds a call with
// an id (the END is of none of its calls: a second END, or the Logic's
// answer to a frame of no call the runtime knows), or one of no id
// beside calls the Logic ended by their ids (a second END of one of
// those, past endedMax). A stream whose calls carry no id, and whose
// Logic ended none by an id, is closed by it: its END, which the Logic
// gave an id of its own.
func holdsOther(noted string, anon, spent bool) bool {
	return noted != "" || anon && spent
}

// closing notes that the END of call, a tool-call id, closes stream id:
// a second END of that call is told by it (see secondEnd).
func (o *openStreams) closing(id, call string) {
	o.closedBy[o.closedByNext] = streamCall{id, call}
	o.closedByNext = (o.closedByNext + 1) % closedByMax
}

// secondEnd reports whether the Logic's END with tool-call id call on
// stream id is a second END of a call ended: one the stream, open,
// keeps ended (see endedCall), or the call whose END closed it (of the
// latest closedByMax: see closing), not open on it again: id is closed,
// or holds calls other than call (a new call opened it since: see
// holds). A stream opened again by a call with that id (the call sent
// again) holds it, and its END is that call's.
//
// It runs for the Logic's END of every call: the END of a stream's call
// noted looks no further (that call is never among the ended, see
// noteCall).
func (o *openStreams) secondEnd(id, call string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			return call != o.calls[i] && o.endedOn(id, call, o.calls[i], o.multi[i], o.done[i], o.anon[i])
		}
	}
	if len(o.more) > 0 {
		if st, ok := o.more[id]; ok {
			return call != st.call && o.endedOn(id, call, st.call, st.multi, st.done, st.anon)
		}
	}
	return slices.Contains(o.closedBy[:], streamCall{id, call})
}

// endedOn is secondEnd for call on id, open, whose call noted is noted
// (not call), whose calls are multi (when several) and the ended ones
// done, and that carries a call of no id when anon.
func (o *openStreams) endedOn(id, call, noted string, multi, done []string, anon bool) bool {
	switch {
	case slices.Contains(done, call):
		return true
	case !holds(noted, anon) || slices.Contains(multi, call):
		return false
	}
	return slices.Contains(o.closedBy[:], streamCall{id, call})
}

// holds reports whether a stream whose call noted is noted, and that
// carries a call of no id when anon, holds a call: one the caller's
// frames opened (a stream the Logic opened with its own frames holds
// none, and its END with any id is the stream's).
func holds(noted string, anon bool) bool { return noted != "" || anon }

// ending returns done, the calls of a stream the Logic ended by their
// ids, with call, the oldest forgotten past endedMax.
func (o *openStreams) ending(done []string, call string) []string {
	if slices.Contains(done, call) {
		return done
	}
	if cap(done) == 0 {
		done, o.spareDone = o.spareDone, nil
	}
	if len(done) == endedMax {
		done = slices.Delete(done, 0, 1)
	}
	return append(done, call)
}

// without returns m, the calls of a stream whose call noted is noted,
// without call, if m holds it, with the call noted then; ok reports
// whether m held it. Down to one call, the stream carries a single call
// again: m is kept for reuse and nil is returned. A stream that carries
// a call of no id (anon) beside its one call noted is left with the
// call of no id when call is the one noted: noted is then "".
func (o *openStreams) without(m []string, noted, call string, anon bool) (_ []string, _ string, ok bool) {
	i := slices.Index(m, call)
	if i < 0 {
		if anon && len(m) == 0 && call == noted {
			return m, "", true
		}
		return m, noted, false
	}
	m = slices.Delete(m, i, i+1)
	if noted == call {
		noted = m[len(m)-1]
	}
	if len(m) == 1 {
		o.keep(m, &o.spare)
		m = nil
	}
	return m, noted, true
}

// call returns the tool-call id noted of the call on id (see noteCall),
// or "" when none was or id is not open.
func (o *openStreams) call(id string) string {
	for i, f := range o.few[:o.n] {
		if f == id {
			return o.calls[i]
		}
	}
	return o.more[id].call
}

// several reports whether id carries several calls: several with ids,
// or one with an id and one of none.
func (o *openStreams) several(id string) bool {
	for i, f := range o.few[:o.n] {
		if f == id {
			return len(o.multi[i]) > 0 || o.anon[i] && o.calls[i] != ""
		}
	}
	st := o.more[id]
	return len(st.multi) > 0 || st.anon && st.call != ""
}

// answers appends to dst the tool-call ids of the calls of id known by
// their id, in the order they came (see noteCall), and reports whether
// the stream also carries a call of no id, or no call known: each is
// answered apart when the incarnation ends (see shell.finish).
func (o *openStreams) answers(id string, dst []string) (_ []string, anon bool) {
	for i, f := range o.few[:o.n] {
		if f == id {
			return knownCalls(dst, o.multi[i], o.calls[i], o.anon[i])
		}
	}
	st := o.more[id]
	return knownCalls(dst, st.multi, st.call, st.anon)
}

// knownCalls is answers for a stream whose calls are multi (when
// several), whose call noted is call and that carries a call of no id
// when anon.
func knownCalls(dst, multi []string, call string, anon bool) (_ []string, _ bool) {
	switch {
	case len(multi) > 0:
		return append(dst, multi...), anon
	case call != "":
		return append(dst, call), anon
	}
	return dst, true
}

// shares reports whether id carries the call of tool-call id call among
// other calls: calls with other ids, or a call of no id, whose frames
// are those without one (see endCall).
func (o *openStreams) shares(id, call string) bool {
	if call == "" {
		return false
	}
	st, ok := o.get(id)
	if !ok {
		return false
	}
	if len(st.multi) > 0 {
		return slices.Contains(st.multi, call) && (len(st.multi) > 1 || st.anon)
	}
	return call == st.call && st.anon
}

// sole returns the tool-call id of the call of id when it carries one
// call, noted with an id; "" otherwise.
func (o *openStreams) sole(id string) string {
	if o.several(id) {
		return ""
	}
	return o.call(id)
}

// has reports whether id is open.
func (o *openStreams) has(id string) bool {
	if slices.Contains(o.few[:o.n], id) {
		return true
	}
	_, ok := o.more[id]
	return ok
}

func (o *openStreams) len() int { return o.n + len(o.more) }

// all returns the open streams, in no order.
func (o *openStreams) all() []string {
	out := make([]string, 0, o.len())
	out = append(out, o.few[:o.n]...)
	for id := range o.more {
		out = append(out, id)
	}
	return out
}

// Emit implements Context. A frame emitted on a stream opens it (the
// duplex owes it an END), but a META (see opensCall). A frame on a call
// the shell answered (see dropEmit), which a resumed Logic may still hold,
// is dropped: the call has its answer. So is the Logic's second END of a
// call it ended, on a stream still open for others (see
// openStreams.secondEnd): a
// consumer that reads such a stream call by call, up to each call's END
// (Conn.RecvStream), would take it for the END of the next call, whose
// answer follows it. So is its second END of the call whose END closed
// its stream (see openStreams.secondEnd), on the stream closed or
// opened since by another call: its consumer, reading the stream again
// for its next call, would stop there.
func (s *shell) Emit(f *messages.Frame) {
	if s.mayKeep(f) {
		s.emitChecked(f)
		return
	}
	s.emit(f)
}

// emitPassed is Emit, and reports whether f went out: false when the
// shell dropped it (see Emit) or the frame observer kept it (see
// FrameObserver.Emitted). Only a frame that went out opens or ends a
// stream for the runtime (see WrapperContext.ToOuterPassed).
func (s *shell) emitPassed(f *messages.Frame) bool {
	if s.mayKeep(f) {
		return s.emitChecked(f)
	}
	s.emit(f)
	return true
}

// mayKeep reports whether f, emitted by the Logic, may be kept from
// going out (see emitChecked): a frame with nothing to check, the
// Logic's text token after token, the hot path, goes straight to emit.
func (s *shell) mayKeep(f *messages.Frame) bool {
	return len(s.muted.m) > 0 || len(s.mutedCalls.m) > 0 || s.answered != nil || s.obs != nil || f.GetType() == messages.FrameType_END
}

// emitChecked is emitPassed for a frame the shell may drop or its
// observer keep.
func (s *shell) emitChecked(f *messages.Frame) bool {
	if (s.muted.len() > 0 || s.mutedCalls.len() > 0 || s.answered != nil) && s.dropEmit(f) {
		s.Logger().Debug("frame on a call already answered dropped",
			slog.String("stream", f.GetStreamId()), slog.String("type", f.GetType().String()))
		return false
	}
	if f.GetType() == messages.FrameType_END && f.GetToolCallId() != "" && s.open.secondEnd(f.GetStreamId(), f.GetToolCallId()) {
		s.Logger().Debug("second END of a call dropped",
			slog.String("stream", f.GetStreamId()), slog.String("call", f.GetToolCallId()))
		return false
	}
	if s.obs != nil && !s.obs.Emitted(f) {
		return false
	}
	s.emit(f)
	return true
}

// dropEmit reports whether f, emitted by the Logic, is on a call the
// shell answered, to be dropped: one a Resume answered, up to the Logic's
// own END of it (see muted, mutedCalls), or one whose caller's input has
// not ended (see answered): on its stream, or, when it was answered alone
// among its stream's calls, with its tool-call id.
func (s *shell) dropEmit(f *messages.Frame) bool {
	id, call := f.GetStreamId(), f.GetToolCallId()
	end := f.GetType() == messages.FrameType_END
	if m, ok := s.muted.get(id); ok {
		if end && m.ends(f) {
			s.muted.remove(id)
		}
		return true
	}
	if s.mutedCalls.len() > 0 {
		k := streamCall{id, call}
		if _, ok := s.mutedCalls.get(k); ok {
			if end {
				s.mutedCalls.remove(k)
			}
			return true
		}
		if end && call == "" {
			// The Logic ends the stream, and with it its calls.
			s.mutedCalls.removeFunc(func(k streamCall) bool { return k.stream == id })
		}
	}
	rec, ok := s.answered.get(id)
	switch {
	case !ok:
		return false
	case rec.shared || rec.served:
		return rec.holds(call)
	}
	return true
}

// emit sends f to the subscriber, noting the streams it opens and closes.
func (s *shell) emit(f *messages.Frame) {
	switch t := f.GetType(); {
	case t == messages.FrameType_END:
		if c := f.GetToolCallId(); c != "" && s.open.endCall(f.GetStreamId(), c) {
			// The END of one of the stream's calls, others open, or a
			// second END of a call ended: it ends none of the others.
			break
		}
		if s.open.remove(f.GetStreamId()) && f.GetToolCallId() != "" {
			s.open.closing(f.GetStreamId(), f.GetToolCallId())
		}
		if s.lastOpen == f.GetStreamId() {
			s.lastOpen = ""
		}
	case t != messages.FrameType_META:
		s.noteOpen(f.GetStreamId())
	}
	switch {
	case s.up != nil:
		// To the parent: the frame and this actor's PID go into its
		// mailbox side by side, so no envelope is allocated per frame.
		s.up.postFrom(s.self, f)
	case s.subscriber != nil:
		// Without a sender, like Send: to a subscriber that is not the
		// parent, a frame is input (a shell) or just a frame (a Conn,
		// a Mux, an actor of the user's).
		s.ctx.Send(s.subscriber, f)
	}
}

// Send implements Context.
func (s *shell) Send(to Ref, f *messages.Frame) {
	if to.pid != nil {
		// Without a sender: what is sent is input to the receiver, never
		// one of its children's frames, and no envelope is allocated.
		s.ctx.Send(to.pid, f)
	}
}

// Spawn implements Context.
func (s *shell) Spawn(spec Spec) (Ref, error) {
	if spec.New == nil {
		return Ref{}, errors.New("spawn: spec has no New function")
	}
	subscriber := s.self
	if !spec.Subscriber.IsZero() {
		subscriber = spec.Subscriber.pid
	}
	var up *mailbox
	if subscriber.Equal(s.self) {
		up = s.mb
	}
	props := s.rt.props(spec, subscriber, up)
	var pid *actor.PID
	if spec.Name != "" {
		// protoactor frees a stopped child's name before this actor has
		// handled its end: a new child under it would take the old one's
		// place here, and the old one's last frames and its ChildStopped
		// would be lost.
		if _, listed := s.children[s.self.Id+"/"+spec.Name]; listed {
			return Ref{}, fmt.Errorf("spawn %q: %w", spec.Name, ErrChildNameInUse)
		}
		var err error
		if pid, err = s.ctx.SpawnNamed(props, spec.Name); err != nil {
			return Ref{}, fmt.Errorf("spawn %q: %w", spec.Name, err)
		}
	} else {
		pid = s.ctx.Spawn(props)
	}
	ref := Ref{pid: pid}
	if s.children == nil {
		s.children = make(map[string]Ref)
	}
	s.children[pid.Id] = ref
	return ref, nil
}

// Stop implements Context.
func (s *shell) Stop(child Ref) {
	if child.pid != nil {
		s.ctx.Poison(child.pid)
	}
}

// Go implements Context.
func (s *shell) Go(key any, fn func(ctx context.Context, progress func(any)) any) func() {
	jobs := s.jobsContext()
	parent := jobs
	var work *callWork
	if stream, ok := key.(string); ok && stream != "" && !s.finished {
		work = s.callWorkOf(stream, jobs)
		parent = work.ctx
	}
	ctx, cancel := context.WithCancel(context.WithValue(parent, parentKey{}, Parent{rt: s.rt, pid: s.self, gone: jobs.Done()}))
	root, self := s.rt.system.Root, s.self
	progress := func(v any) {
		root.Send(self, &asyncProgressMsg{owner: s, AsyncProgress: AsyncProgress{Key: key, Value: v}})
	}
	if work != nil {
		work.n++ // its end comes as an asyncDoneMsg either way
	}
	if !s.rt.tasks.add(self.Id) {
		cancel()
		root.Send(self, &asyncDoneMsg{owner: s, work: work, AsyncDone: AsyncDone{Key: key, Err: ErrClosed}})
		return cancel
	}
	s.rt.jobs.run(func() {
		defer s.rt.tasks.done(self.Id)
		defer cancel()
		done := AsyncDone{Key: key}
		func() {
			defer func() {
				if r := recover(); r != nil {
					done.Err = newPanicError(self.Id, r)
				}
			}()
			done.Value = fn(ctx, progress)
		}()
		root.Send(self, &asyncDoneMsg{owner: s, work: work, AsyncDone: done})
	})
	return cancel
}

// After implements Context.
func (s *shell) After(d time.Duration, key any) func() bool {
	root, self := s.rt.system.Root, s.self
	msg := &timerMsg{owner: s, Timer: Timer{Key: key}}
	t := time.AfterFunc(d, func() { root.Send(self, msg) })
	msg.t = t
	if s.timers == nil {
		s.timers = make(map[*time.Timer]struct{})
	}
	s.timers[t] = struct{}{}
	return t.Stop
}

// Fail implements Context.
func (s *shell) Fail(err error) {
	if err == nil {
		err = errors.New("failed")
	}
	panic(failSignal{err: err})
}

// Self implements Context.
func (s *shell) Self() Ref { return Ref{pid: s.self} }

// jobsContext is the context of the incarnation's background work, made
// on first use (most duplexes start none): cancelled when the incarnation
// ends, and already cancelled when asked for after that.
func (s *shell) jobsContext() context.Context {
	if s.jobs == nil {
		s.jobs, s.endJobs = context.WithCancel(context.Background())
		if s.finished {
			s.endJobs()
		}
	}
	return s.jobs
}

// Logger implements Context: the runtime's logger with the actor's id,
// made on first use (most duplexes never log).
func (s *shell) Logger() *slog.Logger {
	if s.logger == nil {
		s.logger = s.rt.logger.With(slog.String("actor", s.self.Id))
	}
	return s.logger
}

// isClosed reports whether ch is closed; a nil channel never is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stoppingText is the text of the ERROR with which a stopping duplex
// answers a frame that opens a stream (see shell.refuse).
const stoppingText = "duplex stopping: the frame came after the duplex was stopped and was not run"

// restartingText is the text of the ERROR with which a restarting duplex
// answers a frame that opens a stream (see shell.refuse).
const restartingText = "duplex restarting: the frame came while the duplex restarted and was not run"
