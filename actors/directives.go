package actors

import (
	"context"
	"log/slog"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/supervisor"
)

// decidingStrategy is a supervisor strategy whose directives reach only
// the children it decided about. protoactor carries a directive out by
// the child's id: a restart that waits for a backoff (see
// supervisor.Options.InitialBackoff) would reach, once the child it was
// for has stopped and its name was taken again, the new actor of that
// name, and restart it (its open calls closed, its Logic started again)
// for a failure that was not its own.
//
// A directive dropped so is logged (a warning). The runtime's observers
// (RuntimeOptions.OnSupervision, Runtime.WatchSupervision) are told of a
// restart as it is carried out, after its backoff if any, and only when
// it reaches a child (see decision.RestartChildren): a restart dropped so
// is not told. Every other decision is told as it is taken.
type decidingStrategy struct {
	inner *supervisor.Strategy
	rt    *Runtime
}

// HandleFailure implements actor.SupervisorStrategy: inner decides, in
// the supervising actor's turn, and its directives go to the children
// as they were then (see decision).
func (d decidingStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	dec := &decision{Supervisor: sup, registry: system.ProcessRegistry, procs: make(map[*actor.PID]actor.Process, 1), child: child,
		rt: d.rt}
	dec.note(child)
	if _, ok := dec.procs[child]; ok && dec.mbs[child] == nil && child != d.rt.host {
		// A duplex that has failed, and stopped since (its Stopping
		// taken), while its process waits for its children to stop.
		dec.childStopped = true
	}
	d.inner.WithObserver(dec.observe).HandleFailure(system, dec, child, rs, reason, message)
}

// decision is the supervisor a strategy decides with: it notes the
// process of each child the strategy is given (the failed one, and the
// children it lists) as the decision is taken, and carries a directive
// out, then or later, only to a child whose id still names that process.
// A directive for a child that has stopped since is dropped: nothing is
// left to restart, stop or resume, and a newer actor that took its name
// is not the one decided about.
type decision struct {
	actor.Supervisor
	registry *actor.ProcessRegistryValue
	// procs are the children's processes when the decision was taken;
	// written in the supervisor's turn, before any directive (one after a
	// backoff runs on a timer started after them).
	procs map[*actor.PID]actor.Process
	// mbs are the mailboxes of the children among procs that are the
	// runtime's duplexes, noted with them.
	mbs   map[*actor.PID]*mailbox
	child *actor.PID // the failed child
	// childStopped: the failed child, a duplex, had stopped when the
	// decision was taken (the stop of its parent's subtree, say, taken
	// while it waited for the decision).
	childStopped bool
	rt           *Runtime
	// restart is the restart decided, told to the runtime's observers
	// when it is carried out (see RestartChildren).
	restart *supervisor.Event
}

// observe takes the decision: recorded and logged at once, told to the
// runtime's observers at once but for a restart (see RestartChildren).
func (d *decision) observe(ev supervisor.Event) {
	d.rt.decided(ev, d.child)
	if ev.Directive == supervisor.Restart {
		d.restart = &ev
		return
	}
	d.rt.tell(ev)
}

// EscalateFailure implements actor.Supervisor: the supervising actor
// fails with the child's failure (its own, to the runtime's observers:
// see watch.escalating), and notes the child and which of its failures
// this is, suspended until the decision about the actor comes (see
// shell.resumed, host.resumed).
func (d *decision) EscalateFailure(reason, message any) {
	if self := d.Self(); self != nil {
		d.rt.watch.escalating(self, supervisor.ReasonError(reason))
	}
	if k := keeperOf(d.Supervisor); k != nil {
		if proc, ok := d.procs[d.child]; ok {
			c := escalatedChild{pid: d.child, proc: proc, mb: d.mbs[d.child]}
			if c.mb != nil {
				c.failure = c.mb.failures.Load()
				c.watch = &d.rt.watch
			}
			k.keepEscalated(c)
		}
	}
	d.Supervisor.EscalateFailure(reason, message)
}

// escalationKeeper is an actor of the runtime that keeps the children
// whose failure its strategy escalated, to resume them when it is
// resumed itself: a duplex's shell, and the runtime's host.
type escalationKeeper interface {
	keepEscalated(escalatedChild)
}

// keeperOf is the actor sup is the context of, if it is a duplex's or the
// runtime's host.
func keeperOf(sup actor.Supervisor) escalationKeeper {
	c, ok := sup.(interface{ Actor() actor.Actor })
	if !ok {
		return nil
	}
	switch a := c.Actor().(type) {
	case *shell:
		return a
	case *durableShell:
		return a.s
	case *host:
		return a
	}
	return nil
}

// escalatedChild is a child whose failure its parent escalated, its
// process then, and, when it is a duplex, its mailbox, the count of its
// failures then (see resumeEscalation) and the runtime's record of it.
type escalatedChild struct {
	pid     *actor.PID
	proc    actor.Process
	mb      *mailbox
	failure uint64
	watch   *watch
}

// resumeEscalated resumes the children of escalated (see escalatedChild.resume).
func resumeEscalated(escalated []escalatedChild, registry *actor.ProcessRegistryValue) {
	for _, c := range escalated {
		c.resume(registry)
	}
}

// resume resumes the child, unless it stopped since (its id may be a
// newer actor's). A duplex restarted since (all-for-one, for a sibling's
// failure) drops the Resume (see resumeEscalation): the incarnation that
// failed has ended, and a later one that failed waits for the decision
// about its own failure.
func (c escalatedChild) resume(registry *actor.ProcessRegistryValue) {
	now, ok := registry.Get(c.pid)
	if !ok || now != c.proc {
		return
	}
	if c.mb != nil {
		// Noted before it is sent: a restart decided after it, for a
		// sibling's failure, reaches the child once it runs again (see
		// decision.stopWins).
		c.watch.escalationResumeSending(c.pid, c.failure)
		c.proc.SendSystemMessage(c.pid, &resumeEscalation{failure: c.failure})
		return
	}
	c.proc.SendSystemMessage(c.pid, &actor.ResumeMailbox{})
}

// note records the process pid names now, and its mailbox when it is a
// duplex of the runtime.
func (d *decision) note(pid *actor.PID) {
	if _, ok := d.procs[pid]; ok {
		return
	}
	if proc, ok := d.registry.Get(pid); ok {
		d.procs[pid] = proc
		if mb := d.rt.watch.mailboxOf(pid); mb != nil {
			if d.mbs == nil {
				d.mbs = make(map[*actor.PID]*mailbox, 1)
			}
			d.mbs[pid] = mb
		}
	}
}

// Self is the supervising actor, as the supervisor package reports it.
func (d *decision) Self() *actor.PID {
	if s, ok := d.Supervisor.(interface{ Self() *actor.PID }); ok {
		return s.Self()
	}
	return nil
}

// Children implements actor.Supervisor, noting each child's process.
func (d *decision) Children() []*actor.PID {
	pids := d.Supervisor.Children()
	for _, pid := range pids {
		d.note(pid)
	}
	return pids
}

// RestartChildren implements actor.Supervisor. The restart is told to
// the runtime's observers now, before it is sent, with the children it
// restarts as its Affected; a restart that restarts none (every child
// stopped, or is stopping, since the decision, its process still waiting
// for its own children to stop, or a failed one has a stop waiting that
// wins over it, or over a restart sent to it before) is not told. A stop written into a failed child after this, before it
// takes the restart, still wins: the restart was told.
func (d *decision) RestartChildren(pids ...*actor.PID) {
	live := slices.DeleteFunc(slices.Clone(pids), func(pid *actor.PID) bool {
		if pid == d.child && d.childStopped {
			d.dropped(pid, &actor.Restart{}, "the child stopped before the decision")
			return true
		}
		if mb := d.mbs[pid]; mb != nil && mb.stopPosted.Load() || mb == nil && d.rt.watch.stopped(pid) {
			// Stopping: its mailbox drops a restart after the stop. One
			// with no record left has taken its stop, and waits for its
			// own children to stop.
			d.dropped(pid, &actor.Restart{}, "the child is stopping")
			return true
		}
		return false
	})
	if ev := d.restart; ev != nil {
		d.restart = nil
		told := *ev
		told.Affected = nil
		for _, pid := range live {
			if d.restarts(pid) {
				told.Affected = append(told.Affected, pid.GetId())
			}
		}
		if len(told.Affected) > 0 {
			d.rt.tell(told)
		}
	}
	d.send(live, &actor.Restart{})
}

// StopChildren implements actor.Supervisor.
func (d *decision) StopChildren(pids ...*actor.PID) { d.send(pids, &actor.Stop{}) }

// ResumeChildren implements actor.Supervisor. The Resume of a duplex is
// noted as it is sent (see watch.resumeSending): a restart decided after
// it (all-for-one, for a sibling's failure) reaches the duplex once it
// runs again, and restarts it, a stop waiting in its queue or not (see
// stopWins).
func (d *decision) ResumeChildren(pids ...*actor.PID) {
	for _, pid := range pids {
		if d.mbs[pid] != nil && d.current(pid) {
			d.rt.watch.resumeSending(pid)
		}
	}
	d.send(pids, &actor.ResumeMailbox{})
}

// send sends msg to each of pids still running as the process noted for
// it.
func (d *decision) send(pids []*actor.PID, msg any) {
	for _, pid := range pids {
		proc, ok := d.procs[pid]
		if !ok {
			continue
		}
		if now, ok := d.registry.Get(pid); !ok || now != proc {
			d.dropped(pid, msg, "the child stopped after the decision") // its id may be a newer actor's
			continue
		}
		proc.SendSystemMessage(pid, msg)
	}
}

// restarts reports whether the restart sent now reaches pid and restarts
// it: pid still names the process noted for it, and a stop that waits in
// its queue wins neither over this restart nor over one sent to it
// before (see stopWins).
func (d *decision) restarts(pid *actor.PID) bool {
	if !d.current(pid) || d.rt.watch.stopWon(pid) {
		return false
	}
	if d.stopWins(pid) {
		d.rt.watch.stopWins(pid)
		return false
	}
	return true
}

// stopWins reports whether the restart of pid will be taken as the stop
// written into it (see mailbox.stops): its mailbox will be suspended for
// a failure when it takes the restart (see watch.suspendedAhead), and a
// stop waits in its queue. The restart is sent all the same: the stop
// waits for it. The failed child of a decision about an incarnation that
// has ended (restarted for a sibling's failure, under all-for-one) runs
// again, and is restarted, stop or no stop, unless its running
// incarnation failed too; so is a failed child with a Resume queued
// ahead of the restart (an all-for-one Resume, and then a restart for a
// sibling's failure), which runs again before it takes the restart.
func (d *decision) stopWins(pid *actor.PID) bool {
	mb := d.mbs[pid]
	return mb != nil && mb.stops.Load() > 0 && d.rt.watch.suspendedAhead(pid, mb)
}

// current reports whether pid still names the process noted for it.
func (d *decision) current(pid *actor.PID) bool {
	proc, ok := d.procs[pid]
	if !ok {
		return false
	}
	now, ok := d.registry.Get(pid)
	return ok && now == proc
}

// dropped logs that msg, a directive for pid, was not carried out, and
// why.
func (d *decision) dropped(pid *actor.PID, msg any, why string) {
	logger := d.rt.logger
	if !logger.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	directive := "resume"
	switch msg.(type) {
	case *actor.Restart:
		directive = "restart"
	case *actor.Stop:
		directive = "stop"
	}
	logger.Warn("supervision directive dropped", slog.String("supervisor", d.Self().GetId()),
		slog.String("child", pid.GetId()), slog.String("directive", directive),
		slog.String("reason", why))
}
