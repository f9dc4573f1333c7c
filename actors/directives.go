package actors

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// decidingStrategy is a supervisor strategy whose directives reach only
// the children it decided about. protoactor carries a directive out by
// the child's id: a restart that waits for a backoff (see
// supervisor.Options.InitialBackoff) would reach, once the child it was
// for has stopped and its name was taken again, the new actor of that
// name, and restart it (its open calls closed, its Logic started again)
// for a failure that was not its own.
//
// A directive dropped so is logged (a warning): observers were told of
// the decision before it was carried out (see supervisor.Event), and the
// log says it was not.
type decidingStrategy struct {
	inner  actor.SupervisorStrategy
	logger *slog.Logger
	watch  *watch // the runtime's duplexes, to find a child's mailbox
}

// HandleFailure implements actor.SupervisorStrategy: inner decides, in
// the supervising actor's turn, and its directives go to the children
// as they were then (see decision).
func (d decidingStrategy) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	dec := &decision{Supervisor: sup, registry: system.ProcessRegistry, procs: make(map[*actor.PID]actor.Process, 1), child: child,
		logger: d.logger, watch: d.watch}
	dec.note(child)
	d.inner.HandleFailure(system, dec, child, rs, reason, message)
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
	procs  map[*actor.PID]actor.Process
	child  *actor.PID // the failed child
	logger *slog.Logger
	watch  *watch
}

// EscalateFailure implements actor.Supervisor: the supervising actor
// fails with the child's failure, and notes the child and which of its
// failures this is, suspended until the decision about the actor comes
// (see shell.resumed, host.resumed).
func (d *decision) EscalateFailure(reason, message any) {
	if k := keeperOf(d.Supervisor); k != nil {
		if proc, ok := d.procs[d.child]; ok {
			c := escalatedChild{pid: d.child, proc: proc}
			if d.watch != nil {
				if c.mb = d.watch.mailboxOf(d.child); c.mb != nil {
					c.failure = c.mb.failures.Load()
				}
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
// process then, and, when it is a duplex, its mailbox and the count of
// its failures then (see resumeEscalation).
type escalatedChild struct {
	pid     *actor.PID
	proc    actor.Process
	mb      *mailbox
	failure uint64
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
		c.proc.SendSystemMessage(c.pid, &resumeEscalation{failure: c.failure})
		return
	}
	c.proc.SendSystemMessage(c.pid, &actor.ResumeMailbox{})
}

// note records the process pid names now.
func (d *decision) note(pid *actor.PID) {
	if _, ok := d.procs[pid]; ok {
		return
	}
	if proc, ok := d.registry.Get(pid); ok {
		d.procs[pid] = proc
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

// RestartChildren implements actor.Supervisor.
func (d *decision) RestartChildren(pids ...*actor.PID) { d.send(pids, &actor.Restart{}) }

// StopChildren implements actor.Supervisor.
func (d *decision) StopChildren(pids ...*actor.PID) { d.send(pids, &actor.Stop{}) }

// ResumeChildren implements actor.Supervisor.
func (d *decision) ResumeChildren(pids ...*actor.PID) { d.send(pids, &actor.ResumeMailbox{}) }

// send sends msg to each of pids still running as the process noted for
// it.
func (d *decision) send(pids []*actor.PID, msg any) {
	for _, pid := range pids {
		proc, ok := d.procs[pid]
		if !ok {
			continue
		}
		if now, ok := d.registry.Get(pid); !ok || now != proc {
			d.dropped(pid, msg) // stopped since; its id may be a newer actor's
			continue
		}
		proc.SendSystemMessage(pid, msg)
	}
}

// dropped logs that msg, a directive for pid, was not carried out: pid
// stopped after the decision.
func (d *decision) dropped(pid *actor.PID, msg any) {
	if d.logger == nil || !d.logger.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	directive := "resume"
	switch msg.(type) {
	case *actor.Restart:
		directive = "restart"
	case *actor.Stop:
		directive = "stop"
	}
	d.logger.Warn("supervision directive dropped", slog.String("supervisor", d.Self().GetId()),
		slog.String("child", pid.GetId()), slog.String("directive", directive),
		slog.String("reason", "the child stopped after the decision"))
}
