package actors

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/supervisor"
)

// ActorState is where a duplex actor is in its life.
type ActorState int

// The states of a duplex actor.
const (
	// ActorRunning: an incarnation is running.
	ActorRunning ActorState = iota + 1
	// ActorFailed: it failed and its supervisor decided (a restart may
	// wait for a backoff, an escalation for the decision above; a Resume
	// of it then makes it running again).
	ActorFailed
	// ActorRestarting: its incarnation is ending to make way for a fresh
	// one.
	ActorRestarting
	// ActorStopped: it is gone for good (reported by [ActorEvent] only).
	ActorStopped
)

func (s ActorState) String() string {
	switch s {
	case ActorRunning:
		return "running"
	case ActorFailed:
		return "failed"
	case ActorRestarting:
		return "restarting"
	case ActorStopped:
		return "stopped"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// ActorInfo describes one duplex actor of a [Runtime].
type ActorInfo struct {
	// ID is the actor's path, e.g. "polyweave/agent/model"; Parent is its
	// parent's (the runtime's host for a duplex started with Start).
	ID     string
	Parent string
	// Name is its Spec's Name.
	Name    string
	Durable bool
	State   ActorState
	// Since is when it entered State.
	Since time.Time
	// Restarts counts the incarnations after the first.
	Restarts int
	// LastFailure is the reason of its last failure (nil if none), at
	// LastFailureAt.
	LastFailure   error
	LastFailureAt time.Time
}

// ActorEvent reports that a duplex actor changed state, or that its
// supervisor decided about a failure of it (Decision): Actor is as it is
// after the change. A decision's event comes before the restart or stop
// it leads to, with LastFailure set and, for a restart carried out at
// once, a stop or a Resume, State and Restarts still those of the failed
// incarnation (a restart with backoff and an escalation show ActorFailed):
// a decision's event reports no new incarnation, even when its State is
// ActorRunning. Count restarts by the ActorRestarting events, or by the
// ActorRunning events that are no Decision.
//
// Each failure is reported once, as LastFailure, and on the incarnation
// that failed. An incarnation that ends after failing, before its
// supervisor decided about the failure, is reported with that failure as
// LastFailure: one stopped meanwhile (by its parent, or by the stop of
// its parent's subtree) is reported stopped with it, and one restarted
// meanwhile (under all-for-one, for a sibling's failure) is reported
// restarting with it. The decision, taken after, is about an incarnation
// that has ended: it is reported by no ActorEvent, and changes nothing of
// the duplex's next incarnation (that one is not reported failed for it,
// and a failure of its own is reported apart). It is told to the
// supervision watchers as any other decision: a restart as it is carried
// out, with the children it restarts (none is left to restart of a
// duplex that stopped; see [Runtime.WatchSupervision]).
type ActorEvent struct {
	Time  time.Time
	Actor ActorInfo
	// Decision: the event reports a supervisor's decision about the
	// failure in Actor.LastFailure, not a change of incarnation.
	Decision bool
}

// Actors returns the duplex actors of the runtime that are alive, sorted
// by ID (a parent before its children): a live view of its supervision
// tree, for inspectors. It is safe for concurrent use.
func (rt *Runtime) Actors() []ActorInfo {
	return rt.watch.actors()
}

// WatchActors calls fn with every change of state of the runtime's duplex
// actors until the returned stop function is called. fn runs on the
// actor's goroutine: it must be quick, must not block and must be safe for
// concurrent use. A panic of fn is logged (an ERROR record to the
// runtime's logger) and goes no further: the actor goes on, and so do the
// other watchers.
func (rt *Runtime) WatchActors(fn func(ActorEvent)) (stop func()) {
	return rt.watch.actorWatchers.add(fn)
}

// WatchSupervision calls fn with every supervision decision in the
// runtime, as RuntimeOptions.OnSupervision is called (a restart as it is
// carried out), until the returned stop function is called; fn must be
// quick, must not block and must be safe for concurrent use. A panic of
// fn is logged (an ERROR record to the runtime's logger) and goes no
// further: the decision is carried out.
func (rt *Runtime) WatchSupervision(fn func(supervisor.Event)) (stop func()) {
	return rt.watch.supervisionWatchers.add(fn)
}

// ErrNoActor is returned (wrapped) by [Runtime.InjectPanic] for an id that
// is not a running duplex of the runtime.
var ErrNoActor = errors.New("actors: no such duplex")

// InjectPanic makes the duplex id fail as if its Logic had panicked with
// value (a *[PanicError]), for fault-injection experiments: its open
// streams are closed with ERROR and END and its supervisor decides what
// happens next. The panic happens when the actor takes the message, after
// what is already queued to it.
func (rt *Runtime) InjectPanic(id string, value any) error {
	rt.watch.mu.Lock()
	e, ok := rt.watch.table[id]
	rt.watch.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoActor, id)
	}
	rt.system.Root.Send(e.pid, &injectedPanic{value: value})
	return nil
}

// injectedPanic is the message InjectPanic sends.
type injectedPanic struct{ value any }

// injected fails the incarnation for InjectPanic.
func (s *shell) injected(m *injectedPanic) {
	if s.finished || s.logic == nil {
		return
	}
	s.failure = newPanicError(s.self.Id, m.value)
	panic(s.failure)
}

// watch keeps the table of a runtime's duplexes and their watchers.
type watch struct {
	mu    sync.Mutex
	table map[string]*watched
	// stopping are the duplexes that have taken their stop, by id, from
	// their record's end until their process is gone (a stopping duplex
	// waits for its own children to stop): a restart decided for one of
	// them is dropped by its mailbox (see decision.RestartChildren).
	// Those gone are dropped as it grows past prune.
	stopping map[string]*actor.PID
	prune    int

	actorWatchers       watchers[ActorEvent]
	supervisionWatchers watchers[supervisor.Event]
}

// watched is the record of one duplex: its info, and what tells which of
// its incarnations a supervisor's decision is about.
//
// A duplex's failures are counted by its mailbox (mailbox.failures: one
// per failure of any of its incarnations, counted before the failure goes
// to its supervisor), and its supervisor decides about them one by one,
// in the order they came (a child's failures reach its parent in order).
// The n-th decision about a duplex is about its n-th failure: the
// owner's when n is above base, the count at the owner's start, and the
// owner has not ended; an earlier incarnation's, ended, otherwise.
type watched struct {
	info  ActorInfo
	pid   *actor.PID
	owner *shell // the incarnation that last reported
	// base is the count of the duplex's failures when the owner began;
	// decisions counts the decisions taken about its failures; resumed
	// is the count of its failures when the owner was last resumed, and
	// resumeSent when a supervisor's Resume was last sent to it (see
	// resumeSending).
	base, decisions, resumed, resumeSent uint64
	// ended: the owner's incarnation has ended for a restart, and the
	// next one has not begun.
	ended bool
	// escalated is the failure the owner escalated (a child's: see
	// decision.EscalateFailure), its own failure until a Resume.
	escalated error
	// stopWon: a restart was sent to the owner while it failed and a
	// stop waited in its queue: the stop wins over it (see
	// decision.stopWins), and the owner does not restart.
	stopWon bool
}

// failuresOf returns the count of the failures of s's duplex so far.
func failuresOf(s *shell) uint64 { return s.cell.mb.failures.Load() }

// undecided reports whether the owner has a failure that its supervisor
// has not decided about: one counted after its start, and after the
// decisions taken.
func (e *watched) undecided() bool {
	n := failuresOf(e.owner)
	return n > e.base && n > e.decisions
}

// mailboxOf returns the mailbox of the duplex pid names, if it is one of
// the runtime's and has not stopped; nil otherwise.
func (w *watch) mailboxOf(pid *actor.PID) *mailbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entry(pid); ok {
		return e.owner.cell.mb
	}
	return nil
}

func (w *watch) actors() []ActorInfo {
	w.mu.Lock()
	out := make([]ActorInfo, 0, len(w.table))
	for _, e := range w.table {
		out = append(out, e.info)
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b ActorInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// update applies change to id's entry (creating it with create, when
// given) and reports the result to the watchers (a panic of one is logged
// to logger).
func (w *watch) update(logger *slog.Logger, id string, create func() *watched, change func(*watched) bool) {
	w.report(logger, id, create, change, false)
}

// report is update, the event it reports marked as a decision's when
// decision is set.
func (w *watch) report(logger *slog.Logger, id string, create func() *watched, change func(*watched) bool, decision bool) {
	now := time.Now()
	w.mu.Lock()
	if w.table == nil {
		w.table = map[string]*watched{}
	}
	e, ok := w.table[id]
	if !ok {
		if create == nil {
			w.mu.Unlock()
			return
		}
		e = create()
		w.table[id] = e
	}
	before := e.info.State
	if !change(e) {
		w.mu.Unlock()
		return
	}
	if e.info.State != before || e.info.Since.IsZero() {
		e.info.Since = now
	}
	ev := ActorEvent{Time: now, Actor: e.info, Decision: decision}
	if e.info.State == ActorStopped {
		delete(w.table, id)
	}
	w.mu.Unlock()
	w.actorWatchers.notify(logger, "actor watcher", ev)
}

// started records the start of an incarnation (from its shell's begin).
func (w *watch) started(s *shell, ctx actor.Context) {
	create := func() *watched {
		return &watched{pid: s.self, info: ActorInfo{ID: s.self.Id, Parent: ctx.Parent().GetId(), Name: s.spec.Name,
			Durable: s.spec.Durable()}}
	}
	w.update(s.rt.logger, s.self.Id, create, func(e *watched) bool {
		delete(w.stopping, s.self.Id) // gone: its name is taken again
		e.owner, e.pid = s, s.self
		e.info.State = ActorRunning
		e.base, e.resumed, e.resumeSent = failuresOf(s), 0, 0
		e.ended, e.escalated, e.stopWon = false, nil, false
		return true
	})
}

// ended records the end of an incarnation: a restart or a stop. An
// incarnation that failed and ends before its supervisor decided about
// the failure records that failure: stopped (a system stop, as a
// stopping parent sends its children, is taken while the actor waits for
// the decision), or restarted for a sibling's failure (all-for-one). The
// decision, taken after, is about an incarnation that has ended: it
// records nothing (see decided), and its restart is told only if it
// reaches a child (see decision.RestartChildren).
func (w *watch) ended(s *shell, restarting bool) {
	if s.self == nil {
		return
	}
	w.update(s.rt.logger, s.self.Id, nil, func(e *watched) bool {
		if e.owner != s {
			return false // a later incarnation has reported already
		}
		if e.undecided() {
			if err := cmp.Or(s.failure, e.escalated); err != nil {
				e.info.LastFailure, e.info.LastFailureAt = err, time.Now()
			}
		}
		if restarting {
			e.info.State = ActorRestarting
			e.info.Restarts++
			e.ended = true
		} else {
			e.info.State = ActorStopped
			w.noteStopping(s.self, s.rt.system.ProcessRegistry)
		}
		return true
	})
}

// noteStopping notes pid, a duplex that takes its stop, as stopping (see
// watch.stopping), and drops those gone, whose id names no process, once
// the list has grown past its mark; the caller holds w.mu.
func (w *watch) noteStopping(pid *actor.PID, registry *actor.ProcessRegistryValue) {
	if w.stopping == nil {
		w.stopping = map[string]*actor.PID{}
	}
	if len(w.stopping) >= w.prune {
		for id := range w.stopping {
			if _, ok := registry.GetLocal(id); !ok {
				delete(w.stopping, id)
			}
		}
		w.prune = 2*len(w.stopping) + 64
	}
	w.stopping[pid.Id] = pid
}

// stopped reports whether the duplex pid has taken its stop (its record
// has ended, see noteStopping): a restart sent to it now is dropped.
func (w *watch) stopped(pid *actor.PID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping[pid.GetId()] == pid
}

// resumed records that s's incarnation was resumed (see shell.resumed):
// the failure an escalation left it reported in (ActorFailed) is over,
// and it runs.
func (w *watch) resumed(s *shell) {
	w.update(s.rt.logger, s.self.Id, nil, func(e *watched) bool {
		if e.owner != s {
			return false
		}
		e.resumed, e.escalated = failuresOf(s), nil // a next failure is a new one
		if e.info.State != ActorFailed {
			return false
		}
		e.info.State = ActorRunning
		return true
	})
}

// entry returns the record of the duplex pid, if it is one of the
// runtime's and has not stopped; the caller holds w.mu.
func (w *watch) entry(pid *actor.PID) (*watched, bool) {
	e, ok := w.table[pid.GetId()]
	return e, ok && e.pid == pid && e.owner != nil
}

// escalating records that the duplex pid fails with err, a child's
// failure its strategy escalated: its supervisor decides about it, and
// it is the duplex's failure if the duplex ends before that decision.
func (w *watch) escalating(pid *actor.PID, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entry(pid); ok {
		e.escalated = err
	}
}

// suspendedAhead reports whether the duplex pid, whose mailbox is mb,
// will be suspended for a failure when it takes a directive sent now: its
// running incarnation has failed, and neither a Resume of it has been
// taken since nor one sent since waits in its queue, ahead of the
// directive (see resumeSending). Its mailbox may not have taken the
// suspension yet: it takes it before any directive sent now. An
// incarnation that has ended (a restart taken, the next not begun) is
// told by its mailbox alone.
func (w *watch) suspendedAhead(pid *actor.PID, mb *mailbox) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entry(pid)
	if !ok || e.ended {
		return mb.suspended.Load()
	}
	n := failuresOf(e.owner)
	return n > e.base && n > e.resumed && n > e.resumeSent
}

// resumeSending records that a supervisor's Resume is sent to the duplex
// pid now: its queue takes it before any directive sent after, and a
// failure counted before it is over once it is taken (a failure counted
// after, its suspension queued behind the Resume, is not).
func (w *watch) resumeSending(pid *actor.PID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entry(pid); ok && !e.ended {
		e.resumeSent = failuresOf(e.owner)
	}
}

// escalationResumeSending records that the Resume of the duplex pid's
// failure-th failure, which its parent escalated, is sent to it now (see
// resumeEscalation): taken, it is over, as after resumeSending. A later
// failure, whether its suspension comes before the Resume (which is then
// dropped) or after, is not.
func (w *watch) escalationResumeSending(pid *actor.PID, failure uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entry(pid); ok && !e.ended && failure > e.resumeSent {
		e.resumeSent = failure
	}
}

// stopWins records that the stop waiting in the queue of the duplex pid
// wins over a restart sent to it (see decision.stopWins).
func (w *watch) stopWins(pid *actor.PID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.entry(pid); ok {
		e.stopWon = true
	}
}

// stopWon reports whether a restart sent to the duplex pid before was
// one its waiting stop wins over (see stopWins): it ends at that stop,
// and restarts no more.
func (w *watch) stopWon(pid *actor.PID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entry(pid)
	return ok && e.stopWon
}

// decided records a supervision decision about child as it is taken, and
// logs it; it is told to RuntimeOptions.OnSupervision and the watchers
// apart (see tell, decision.observe). It is recorded on the incarnation
// it is about (see watched) unless that one has ended, having recorded
// its failure as it ended (see ended); a decision about a duplex that
// has stopped, whose name a newer one may have taken, is recorded on
// none.
func (rt *Runtime) decided(ev supervisor.Event, child *actor.PID) {
	rt.logSupervision(ev)
	rt.watch.report(rt.logger, ev.Child, nil, func(e *watched) bool {
		if e.pid != child {
			return false
		}
		e.decisions++
		if e.decisions <= e.base || e.ended {
			return false // about an incarnation that has ended
		}
		e.info.LastFailure, e.info.LastFailureAt = ev.Reason, ev.Time
		// A restart without backoff and a stop are under way already (the
		// child reports them); one with backoff and an escalation wait.
		if ev.Directive == supervisor.Escalate || ev.Directive == supervisor.Restart && ev.Backoff > 0 && !ev.IntensityExceeded {
			e.info.State = ActorFailed
		}
		return true
	}, true)
}

// tell passes a supervision decision on to RuntimeOptions.OnSupervision
// and the watchers.
func (rt *Runtime) tell(ev supervisor.Event) {
	if rt.observe != nil {
		callSafely(rt.logger, "OnSupervision", rt.observe, ev)
	}
	rt.watch.supervisionWatchers.notify(rt.logger, "supervision watcher", ev)
}

// watchers is a copy-on-write list of callbacks.
type watchers[E any] struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*func(E)]
}

func (ws *watchers[E]) add(fn func(E)) func() {
	p := &fn
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var next []*func(E)
	if cur := ws.list.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, p)
	ws.list.Store(&next)
	return func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		cur := ws.list.Load()
		if cur == nil {
			return
		}
		next := slices.DeleteFunc(slices.Clone(*cur), func(q *func(E)) bool { return q == p })
		ws.list.Store(&next)
	}
}

// notify calls every watcher with ev; a panic of one is logged to logger
// as what's and the others are called all the same.
func (ws *watchers[E]) notify(logger *slog.Logger, what string, ev E) {
	cur := ws.list.Load()
	if cur == nil {
		return
	}
	for _, fn := range *cur {
		callSafely(logger, what, *fn, ev)
	}
}

// callSafely calls a host's callback fn with ev on an actor's goroutine,
// and logs a panic of it instead of letting it unwind the actor's start,
// stop or supervision decision: a bug of the host's must not hang or
// fail the actors it watches.
func callSafely[E any](logger *slog.Logger, what string, fn func(E), ev E) {
	defer func() {
		if r := recover(); r != nil {
			logger.Error("actors: a "+what+" panicked", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	fn(ev)
}
