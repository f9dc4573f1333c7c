package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// mailbox is the protoactor mailbox of every duplex. It keeps protoactor's
// default mailbox semantics (unbounded; system messages before user
// messages; suspended while the supervisor decides about a failure; at most
// the dispatcher's throughput of messages per run before yielding) and
// differs on the hop path:
//
//   - a frame a child emits to its parent is queued with the child's PID
//     beside it, where protoactor's Request allocates a *MessageEnvelope
//     per frame to carry the sender: the parent reads it from [mailbox.from]
//     while the frame is being delivered;
//   - children's frames have a queue of their own, and while both queues
//     hold messages the consumer takes from each in turn: a backlog
//     written into a wrapper does not hold its inner duplex's answers
//     back (in one queue, each answer would wait behind every input
//     written since its request, and the backlog would be held twice).
//     Each queue is first in, first out: a child's frames keep their
//     order, and so do the messages written into the actor by any one
//     sender (the order protoactor promises). Between the two queues
//     there is one order: a stop written into the actor (protoactor's
//     PoisonPill, what Context.Stop sends) comes after every child's
//     frame queued before it. The input queue waits while the
//     children's queue still holds frames queued before a stop, so an
//     actor stopped "after the messages already queued to it" gets its
//     children's last answers first. Otherwise there is no order
//     between the queues, as between any two senders;
//   - a child's end (see shell's handling of protoactor's Terminated) is
//     queued among its frames, after the last of them, as a childFrame
//     without a frame: it is taken as a [childGone] with the child
//     beside it;
//   - a supervisor's Restart that comes after a Stop is dropped (see
//     [mailbox.stopped]), and one that comes to an actor suspended for
//     its failure while a stop written into it waits in its queue is
//     dropped, the actor stopping instead (see [mailbox.stops]), as is
//     any Restart after that one (see [mailbox.stopWon]); a stopped
//     actor's mailbox is suspended no more (see [mailbox.stop]);
//   - a parent resumed after escalating the actor's failure resumes it
//     with a [resumeEscalation], taken only while the actor is still
//     suspended for that failure (see [mailbox.failures]);
//   - the consumer takes up to mailboxBatch messages per lock;
//   - each queue is a list of segments that grow from mailboxFirst to
//     mailboxSegment entries, rewound whenever the queue empties: a
//     message costs no allocation unless the backlog outgrows the
//     segment, a burst never copies what is queued (protoactor's ring
//     copies it at each doubling), and an actor keeps one segment of at
//     most mailboxSegment entries a queue after a burst (protoactor's
//     keeps the ring the burst grew).
type mailbox struct {
	// The queues (under mu): in holds messages written into the actor
	// (frames and everything else), kids the frames its children emit
	// to it. turn says which the consumer takes from next when both have
	// some.
	mu     sync.Mutex
	in     queue[any]
	kids   queue[childFrame]
	turn   bool // the next pick is from kids
	queued int  // entries in both
	// kidsIn counts the entries ever queued in kids, so kidsIn - kids.n
	// is how many were taken; stopAt is kidsIn when the last stop was
	// queued in in: until that many were taken, in waits.
	kidsIn uint64
	stopAt uint64

	// batch holds what the consumer took from the queues with one lock:
	// batch[next:taken] are still to process, and batch[:settled] are
	// no longer counted in user. Consumer only.
	batch   [mailboxBatch]entry
	next    int
	taken   int
	settled int

	// user counts the user messages posted and not yet handled, give or
	// take the batch in hand: those in the queues, and the batch's but
	// the first (settled) until the consumer settles the rest, as it
	// takes the next batch or ends a run (see settle). The run loop, the
	// scheduling check and UserMessageCount read it without the lock.
	// The consumer subtracts once per batch, one atomic operation on a
	// line the producers write per batch rather than per message.
	user atomic.Int32

	sysMu   sync.Mutex
	sys     []any // system messages, sys[sysHead:] still to process (under sysMu)
	sysHead int
	sysN    atomic.Int32

	status     atomic.Int32 // idle or running
	suspended  atomic.Bool
	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	// ready: invoker and dispatcher are set. protoactor registers a new
	// actor's process, so that its id reaches this mailbox, before it
	// registers the handlers: a message posted in that gap waits.
	ready   atomic.Bool
	process func() // m.processMessages, made once
	// stopped: protoactor's Stop was taken; consumer only. A stop is for
	// good, and a Restart taken after it is dropped: a supervisor's
	// restart may reach a failed child after its parent stopped it (the
	// parent ending normally while its failure was being escalated), and
	// protoactor's actor would restart even once stopped, incarnating
	// afresh an actor gone from its parent and its registry (or, still
	// waiting for its children to stop, restart instead of stopping).
	stopped bool
	// stops counts the stops written into the actor (PoisonPills) that
	// are queued, not yet taken to be handled. A Restart taken while one
	// is queued and the mailbox is suspended (the actor failed) is
	// dropped, and the actor stopped instead: the stop was asked for
	// before the restart happened, and wins. A failed actor's queue
	// waits while its supervisor decides, and its Restart, a system
	// message, would otherwise be taken first: the Logic started again,
	// only to be stopped. Its incarnation ends as at a stop
	// ([stopQueued]), and the queue goes on up to the stop, its calls
	// refused as a stopping duplex refuses them. The stop waits for the
	// Restart, after its backoff if any: it is in the queue that waits.
	// An actor that did not fail (restarted all-for-one for a sibling's
	// failure) is restarted: its queue did not wait, and the calls
	// before the stop reach its next incarnation, as Context.Stop
	// promises.
	stops atomic.Int32
	// stopWon: a Restart was taken as the queued stop ([stopQueued]);
	// consumer only. The incarnation has ended for good: a later Restart
	// (under all-for-one, each failure's decision restarts every child,
	// so a failed child may get two) is dropped as one after the stop
	// is, and a Resume resumes no Logic.
	stopWon bool
	// incarnations counts the actor's incarnations begun (see
	// shell.begin). restarting: a Restart was taken when incarnations was
	// restartOf, and its ResumeMailbox, which protoactor sends once the
	// new incarnation is made, not yet. Consumer only. A ResumeMailbox
	// taken before the restart is complete (it waits for the actor's
	// children to stop) is a decision about the incarnation that ended,
	// stale: dropped, the actor's queue waits for its next incarnation
	// (a resumeEscalation is dropped then too). The one taken after that completes the restart and
	// is passed to no shell (see resumed).
	incarnations, restartOf int
	restarting              bool
	// failures counts the SuspendMailbox messages posted: one per
	// failure of the actor, posted by protoactor (from the actor's own
	// turn) before the failure goes to its supervisor. suspends counts
	// those taken; consumer only. A parent that escalates the actor's
	// failure notes failures then, and its Resume resumes the actor only
	// while it is still suspended for that failure (see
	// resumeEscalation). It is read as the parent decides, not carried
	// with the failure: a later failure that came before the decision
	// (a restart queued ahead of the failure, whose incarnation failed
	// as it started) is counted in, and taken for the one escalated.
	failures atomic.Uint64
	suspends uint64
	// stopPosted: protoactor's Stop was posted (and stopped will be set
	// when it is taken). A supervisor's restart sent after that would be
	// dropped (see stopped): it is not sent, nor told to the runtime's
	// observers (see decision.RestartChildren).
	stopPosted atomic.Bool

	// from is the child beside the user message being invoked (nil for
	// other messages). Only the consumer reads and writes it.
	from *actor.PID

	// direct is the shell of the running incarnation, which the run
	// hands the frames it queued (a child's with the child beside it)
	// without protoactor's invocation (see shell.begin): set by the
	// shell as it starts, in a run, and read by the consumer.
	direct *shell
}

// entry is a user message taken for processing, and the child that
// emitted it when it is a child's frame.
type entry struct {
	msg  any
	from *actor.PID
}

// childFrame is a queued frame from a child; without a frame (f nil), the
// child's end, queued after its last frame.
type childFrame struct {
	f    *messages.Frame
	from *actor.PID
}

// stopQueued is the message a Restart is taken as while a stop waits in
// the queue (see mailbox.stops): the shell ends its incarnation as a
// stop does.
type stopQueued struct{}

// resumed is the message protoactor's ResumeMailbox is passed to the
// shell as, once the mailbox is resumed after a supervisor's Resume
// directive (not the ResumeMailbox that completes a restart: see
// mailbox.restarting).
type resumed struct{}

// resumeEscalation is the system message with which a parent resumed
// after escalating the actor's failure resumes it (see
// escalatedChild.resume): failure is the count of the actor's failures
// (mailbox.failures) when its failure was escalated. It resumes the
// actor only while the actor is suspended for that failure: if the
// incarnation that failed has ended since (a restart for a sibling's
// failure, under all-for-one) and a later one failed, the later failure
// waits for its own supervisor's decision.
type resumeEscalation struct{ failure uint64 }

// childGone is the user message a child's end is taken as (see
// mailbox.postGone), with the child in [mailbox.from].
type childGone struct{}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

// mailboxBatch is the most user messages the consumer takes per lock;
// mailboxFirst is the size of a queue's first segment, doubled for each
// next one up to mailboxSegment. The first two are small: every duplex
// has a mailbox, and an idle session keeps a dozen of them.
const (
	mailboxBatch   = 4
	mailboxFirst   = 4
	mailboxSegment = 256
)

// queue is a FIFO of segments that grow from mailboxFirst to
// mailboxSegment entries, rewound whenever it empties: n entries, read
// from head at hi, written into tail at ti.
//
// While a backlog stands in the queue, the consumer hands each full-size
// segment it has read to the producer (spare), which writes into it
// once the tail is full: a backlog that moves through the queue costs
// no allocation, where a segment per mailboxSegment messages would be
// garbage, and the collector would run the more often, with the write
// barriers of every hop on. The spare is dropped when the queue
// empties, so an idle actor still keeps one segment.
type queue[T any] struct {
	head, tail *segment[T]
	spare      *segment[T]
	hi, ti     int
	n          int
}

// segment is a run of queued entries and the next one.
type segment[T any] struct {
	e    []T
	next *segment[T]
}

func (q *queue[T]) push(v T) {
	switch {
	case q.tail == nil:
		q.tail = &segment[T]{e: make([]T, mailboxFirst)}
		q.head = q.tail
	case q.ti == len(q.tail.e):
		s := q.spare
		if s != nil {
			q.spare = nil
		} else {
			s = &segment[T]{e: make([]T, min(2*len(q.tail.e), mailboxSegment))}
		}
		q.tail.next, q.tail, q.ti = s, s, 0
	}
	q.tail.e[q.ti] = v
	q.ti++
	q.n++
}

// pop takes the first entry; the queue must hold one.
func (q *queue[T]) pop() T {
	if q.hi == len(q.head.e) {
		read := q.head
		q.head, q.hi = read.next, 0
		read.next = nil
		if len(read.e) == mailboxSegment {
			// Every entry of it was cleared as it was read.
			q.spare = read
		}
	}
	v := q.head.e[q.hi]
	var zero T
	q.head.e[q.hi] = zero
	q.hi++
	if q.n--; q.n == 0 {
		// Empty, so head is tail and everything in it was read: the
		// next entry goes to its start, and a burst's spare goes.
		q.hi, q.ti = 0, 0
		q.spare = nil
	}
	return v
}

var _ actor.Mailbox = (*mailbox)(nil)

func newMailbox() *mailbox {
	m := &mailbox{}
	m.process = m.processMessages
	return m
}

// mailboxCell carries a duplex's mailbox from the props that make it to
// the shells of the duplex's incarnations: protoactor makes an actor's
// first incarnation before its mailbox, and does not hand the mailbox to
// the actor.
//
// last is the duplex's latest incarnation, set as it begins: the next
// one takes over the record of the calls it answered (see closedCalls).
type mailboxCell struct {
	mb   *mailbox
	last *shell
}

// producer returns the MailboxProducer of props that stores each mailbox
// it makes in c.
func (c *mailboxCell) producer() actor.MailboxProducer {
	return func() actor.Mailbox {
		mb := newMailbox()
		c.mb = mb
		return mb
	}
}

// PostUserMessage implements actor.Mailbox.
func (m *mailbox) PostUserMessage(message any) {
	if f, ok := message.(*messages.Frame); ok {
		// The hop path: a frame is not a batch (a concrete type check
		// costs less than the two interface checks below).
		m.post(f)
		return
	}
	// As protoactor's mailbox: a batch is delivered message by message,
	// and then as itself.
	if batch, ok := message.(actor.MessageBatch); ok {
		for _, msg := range batch.GetMessages() {
			m.PostUserMessage(msg)
		}
	}
	inner := message
	if env, ok := message.(*actor.MessageEnvelope); ok {
		inner = env.Message
		if batch, ok := env.Message.(actor.MessageBatch); ok {
			for _, msg := range batch.GetMessages() {
				m.PostUserMessage(msg)
			}
		}
	}
	if _, ok := inner.(*actor.PoisonPill); ok {
		m.postStop(message)
		return
	}
	m.post(message)
}

// postStop queues msg, a stop, after every child's frame queued so far
// (see popUser).
func (m *mailbox) postStop(msg any) {
	m.stops.Add(1) // before it can be taken (see run)
	m.mu.Lock()
	m.in.push(msg)
	m.queued++
	m.stopAt = m.kidsIn // the latest stop's mark is the largest
	m.mu.Unlock()
	m.posted()
}

// postFrom queues f as a frame from the child from: the hop a child's
// Emit makes to its parent, with no envelope.
func (m *mailbox) postFrom(from *actor.PID, f *messages.Frame) {
	m.mu.Lock()
	m.kids.push(childFrame{f: f, from: from})
	m.kidsIn++
	m.queued++
	m.mu.Unlock()
	m.posted()
}

// postGone queues the end of the child from after its frames: taken, it
// is a [childGone] with the child in [mailbox.from].
func (m *mailbox) postGone(from *actor.PID) { m.postFrom(from, nil) }

func (m *mailbox) post(msg any) {
	m.mu.Lock()
	m.in.push(msg)
	m.queued++
	m.mu.Unlock()
	m.posted()
}

// posted counts a message just queued and schedules the mailbox.
func (m *mailbox) posted() {
	// Counted after it is queued, as protoactor does: the consumer never
	// sees a count for a message it cannot take.
	m.user.Add(1)
	m.schedule()
}

// PostSystemMessage implements actor.Mailbox.
func (m *mailbox) PostSystemMessage(message any) {
	switch message.(type) {
	case *actor.SuspendMailbox:
		m.failures.Add(1) // before the failure reaches the supervisor
	case *actor.Stop:
		m.stopPosted.Store(true)
	}
	m.sysMu.Lock()
	m.sys = append(m.sys, message)
	m.sysN.Add(1)
	m.sysMu.Unlock()
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
	m.ready.Store(true)
}

// Start implements actor.Mailbox.
func (m *mailbox) Start() {}

// UserMessageCount implements actor.Mailbox: the user messages waiting,
// those taken into the consumer's batch and not yet handled among them.
// It is exact while the mailbox is idle or suspended, and as the first
// message of a batch is handled; as the next ones of that batch are, it
// may still count up to mailboxBatch-1 handled before them (they are
// settled per batch, not per message), never fewer than wait.
func (m *mailbox) UserMessageCount() int { return int(max(m.user.Load(), 0)) }

func (m *mailbox) schedule() {
	// A load first: while the mailbox runs, posting costs no CAS. A post
	// that sees it running counted its message before looking, and the
	// run counts again after going idle (processMessages), so the
	// message is never left behind.
	if m.status.Load() == mailboxIdle && m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		if m.ready.Load() {
			m.dispatcher.Schedule(m.process)
			return
		}
		// No handlers yet (see ready): the message waits for the first
		// post after they are registered (the spawn's Started). Handlers
		// registered while this post held the mailbox running made that
		// post leave the run to this one: schedule again then.
		m.status.Store(mailboxIdle)
		if m.ready.Load() {
			m.schedule()
		}
	}
}

func (m *mailbox) processMessages() {
	for {
		m.run()
		// The messages handled are counted no more: the count is exact
		// while the mailbox is idle or suspended.
		m.settle()
		// A run that ended on a panic or a suspension may leave messages
		// in the batch: read before going idle, since a run scheduled
		// then may take them.
		batched := m.next < m.taken
		m.status.Store(mailboxIdle)
		// Messages posted after the run ended and before it went idle.
		if m.sysN.Load() > 0 || (!m.suspended.Load() && (batched || m.user.Load() > 0)) {
			if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
				continue
			}
		}
		return
	}
}

func (m *mailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.from = nil
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		// System messages first, all of them.
		if msg = m.popSystem(); msg != nil {
			switch sm := msg.(type) {
			case *actor.SuspendMailbox:
				m.suspends++
				if !m.stopped { // a stopped actor waits for no decision
					m.suspended.Store(true)
				}
			case *resumeEscalation:
				if m.suspends != sm.failure || !m.suspended.Load() || m.restarting || m.stopped || m.stopWon {
					continue // stale: not suspended for the failure escalated
				}
				m.suspended.Store(false)
				m.invoker.InvokeUserMessage(resumed{})
			case *actor.ResumeMailbox:
				if m.restarting && m.incarnations == m.restartOf && !m.stopped && !m.stopWon {
					continue // stale: the incarnation it was about has ended
				}
				restarted := m.restarting
				m.restarting = false
				m.suspended.Store(false)
				if !m.stopped && !m.stopWon && !restarted {
					// The supervisor's Resume: the shell answers the
					// call that failed it, if any, and resumes the
					// children whose failure it escalated (see
					// resumed). The one protoactor sends as a restart
					// completes, queued before the new incarnation's
					// Started, is no decision about it: a failure of
					// its Started, taken before, stays its own.
					m.invoker.InvokeUserMessage(resumed{})
				}
			case *actor.Stop:
				m.stop(msg)
			case *actor.Restart:
				switch {
				case m.stopped || m.stopWon:
					// A restart after the stop is dropped: protoactor
					// would carry it out, bringing back an actor stopped
					// for good (see mailbox.stopped), or one whose
					// queued stop already won (see mailbox.stopWon).
				case m.suspended.Load() && m.stops.Load() > 0:
					// The actor failed, and a stop waits in the queue:
					// it wins (see mailbox.stops). The incarnation
					// ends as at a stop, and the queue goes on
					// (suspended no more) up to the stop: what came
					// before it is refused (see shell.late), and the
					// stop taken. An actor restarted for a sibling's
					// failure (all-for-one) is restarted: its queue
					// did not wait, and the calls before its stop are
					// served.
					m.suspended.Store(false)
					m.stopWon = true
					m.invoker.InvokeUserMessage(stopQueued{})
				default:
					m.restarting, m.restartOf = true, m.incarnations
					m.invoker.InvokeSystemMessage(msg)
				}
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		// Suspended: user messages wait for the supervisor's decision.
		if m.suspended.Load() {
			return
		}
		e, ok := m.popUser()
		if !ok {
			return
		}
		msg = e.msg
		if f, ok := msg.(*messages.Frame); ok && m.direct != nil {
			m.direct.receiveFrame(f, e.from)
			continue
		}
		if m.stops.Load() > 0 && isStop(msg) {
			m.stops.Add(-1)
		}
		m.from = e.from
		m.invoker.InvokeUserMessage(msg)
		m.from = nil
	}
}

// stop takes msg, protoactor's Stop: for good (see mailbox.stopped). A
// failed actor's mailbox is suspended while its supervisor decides:
// stopped, it waits for no decision, and is suspended no more, so that
// the stopping actor takes what waits in it and refuses the calls among
// them, as any stopping duplex does (see shell.late), rather than leave
// them unanswered.
func (m *mailbox) stop(msg any) {
	m.stopped = true
	m.suspended.Store(false)
	m.invoker.InvokeSystemMessage(msg)
}

// isStop reports whether msg, a user message, is a stop written into
// the actor (a PoisonPill, in an envelope or not).
func isStop(msg any) bool {
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		msg = env.Message
	}
	_, ok := msg.(*actor.PoisonPill)
	return ok
}

func (m *mailbox) popSystem() any {
	if m.sysN.Load() == 0 {
		return nil
	}
	m.sysMu.Lock()
	defer m.sysMu.Unlock()
	msg := m.sys[m.sysHead]
	m.sys[m.sysHead] = nil
	m.sysHead++
	if m.sysHead == len(m.sys) {
		m.sys, m.sysHead = m.sys[:0], 0
	}
	m.sysN.Add(-1)
	return msg
}

// popUser takes the next user message; consumer only. While both
// queues hold messages it takes from each in turn, so that a backlog
// written into the actor does not hold its children's frames back;
// but while fewer children's frames were taken than were queued before
// the last stop, it takes from the children's queue only, so that the
// stop comes after them.
func (m *mailbox) popUser() (entry, bool) {
	if m.next == m.taken {
		// The batch is spent: beyond its messages not yet settled, every
		// message counted is in the queues (counted once queued), so a
		// positive rest means they hold some.
		spent := int32(m.taken - m.settled)
		if m.user.Load()-spent <= 0 {
			m.settle()
			return entry{}, false
		}
		m.mu.Lock()
		k := min(m.queued, mailboxBatch)
		for i := range k {
			// kidsIn-kids.n < stopAt implies kids.n > 0: it is only
			// looked at when in would be taken.
			if m.kids.n > 0 && (m.turn || m.in.n == 0 || m.kidsIn-uint64(m.kids.n) < m.stopAt) {
				c := m.kids.pop()
				if c.f == nil {
					m.batch[i] = entry{msg: childGone{}, from: c.from}
				} else {
					m.batch[i] = entry{msg: c.f, from: c.from}
				}
			} else {
				m.batch[i] = entry{msg: m.in.pop()}
			}
			m.turn = !m.turn
		}
		m.queued -= k
		m.mu.Unlock()
		if k == 0 {
			m.settle()
			return entry{}, false
		}
		// The spent batch is settled, and the first message of this
		// one, handled now, counted no more: one atomic operation.
		m.user.Add(-spent - 1)
		m.next, m.taken, m.settled = 0, k, 1
	}
	e := m.batch[m.next]
	m.batch[m.next] = entry{}
	m.next++
	return e, true
}

// settle stops counting the messages of the batch handled so far (those
// taken from it); consumer only.
func (m *mailbox) settle() {
	if d := m.next - m.settled; d > 0 {
		m.user.Add(int32(-d))
		m.settled = m.next
	}
}
