package actors

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// recordingInvoker records what a mailbox invokes, with the child beside
// each user message, and panics on the user message panicOn.
type recordingInvoker struct {
	mb        *mailbox
	user      []any
	from      []*actor.PID
	system    []any
	escalated []any
	panicOn   any
}

func (r *recordingInvoker) InvokeSystemMessage(m any) { r.system = append(r.system, m) }
func (r *recordingInvoker) InvokeUserMessage(m any) {
	r.user = append(r.user, m)
	r.from = append(r.from, r.mb.from)
	if m == r.panicOn {
		panic("asked to")
	}
}
func (r *recordingInvoker) EscalateFailure(reason, m any) { r.escalated = append(r.escalated, m) }

// manualDispatcher runs scheduled mailbox runs when the test says so.
type manualDispatcher struct{ runs []func() }

func (d *manualDispatcher) Schedule(fn func()) { d.runs = append(d.runs, fn) }
func (d *manualDispatcher) Throughput() int    { return 300 }
func (d *manualDispatcher) runAll() {
	for len(d.runs) > 0 {
		fn := d.runs[0]
		d.runs = d.runs[1:]
		fn()
	}
}

func newTestMailbox() (*mailbox, *recordingInvoker, *manualDispatcher) {
	mb := newMailbox()
	inv := &recordingInvoker{mb: mb}
	d := &manualDispatcher{}
	mb.RegisterHandlers(inv, d)
	return mb, inv, d
}

// TestMailbox_OrderAndSenders queues more messages than a segment's first
// size and one batch hold, children's frames among plain messages, and
// checks that what was written into the actor comes out in order, the
// children's frames in order with the child beside each, and nothing
// beside the others.
func TestMailbox_OrderAndSenders(t *testing.T) {
	mb, inv, d := newTestMailbox()
	child := actor.NewPID("test", "parent/child")
	var wantIn, wantKids []any
	for i := range 100 {
		if i%3 == 0 {
			f := messages.Text("s", fmt.Sprint(i))
			mb.postFrom(child, f)
			wantKids = append(wantKids, f)
			continue
		}
		mb.PostUserMessage(i)
		wantIn = append(wantIn, i)
	}
	if n := mb.UserMessageCount(); n != 100 {
		t.Fatalf("UserMessageCount = %d before the run, want 100", n)
	}
	if len(d.runs) != 1 {
		t.Fatalf("%d runs scheduled for 100 posts, want 1", len(d.runs))
	}
	d.runAll()
	var gotIn, gotKids []any
	for i, m := range inv.user {
		switch from := inv.from[i]; {
		case from == child:
			gotKids = append(gotKids, m)
		case from != nil:
			t.Fatalf("message %v invoked beside %v", m, from)
		default:
			gotIn = append(gotIn, m)
		}
	}
	if !slices.Equal(gotIn, wantIn) || !slices.Equal(gotKids, wantKids) {
		t.Fatalf("invoked %v, and from the child %v;\nwant %v, and from the child %v", gotIn, gotKids, wantIn, wantKids)
	}
	if mb.from != nil || mb.UserMessageCount() != 0 {
		t.Fatalf("after the run: from %v, %d user messages left", mb.from, mb.UserMessageCount())
	}
	// Drained: the next post schedules a new run.
	mb.PostUserMessage("again")
	if len(d.runs) != 1 {
		t.Fatalf("%d runs scheduled after the mailbox went idle, want 1", len(d.runs))
	}
	d.runAll()
	if last := inv.user[len(inv.user)-1]; last != "again" {
		t.Fatalf("last invoked %v, want again", last)
	}
}

// TestMailbox_ChildFramesNotBehindBacklog: a child's frame is not queued
// behind a backlog of messages written into the actor (a wrapper's
// inner answers would otherwise wait behind every input sent since):
// while both queues hold messages, they are taken in turn.
func TestMailbox_ChildFramesNotBehindBacklog(t *testing.T) {
	mb, inv, d := newTestMailbox()
	child := actor.NewPID("test", "parent/child")
	for i := range 100 {
		mb.PostUserMessage(i)
	}
	f1, f2 := messages.Text("s", "1"), messages.Text("s", "2")
	mb.postFrom(child, f1)
	mb.postFrom(child, f2)
	d.runAll()
	want := []any{0, f1, 1, f2, 2, 3}
	if len(inv.user) != 102 || !slices.Equal(inv.user[:len(want)], want) {
		t.Fatalf("invoked %v..., want %v... (102 in all)", inv.user[:min(len(inv.user), len(want))], want)
	}
	if slices.ContainsFunc(mb.kids.head.e, func(c childFrame) bool { return c != childFrame{} }) {
		t.Fatalf("after the run the children's queue still holds %v", mb.kids.head.e)
	}
}

// TestMailbox_SystemFirstAndSuspension: system messages go before user
// messages, and a suspended mailbox keeps its user messages until it is
// resumed, as protoactor's does while a supervisor decides.
func TestMailbox_SystemFirstAndSuspension(t *testing.T) {
	mb, inv, d := newTestMailbox()
	mb.PostUserMessage("u1")
	mb.PostSystemMessage("s1")
	mb.PostSystemMessage(&actor.SuspendMailbox{})
	d.runAll()
	if !slices.Equal(inv.system, []any{"s1"}) || len(inv.user) != 0 {
		t.Fatalf("suspended run invoked system %v, user %v; want s1 and no user message", inv.system, inv.user)
	}
	mb.PostUserMessage("u2")
	d.runAll()
	if len(inv.user) != 0 || mb.UserMessageCount() != 2 {
		t.Fatalf("suspended: invoked %v, %d waiting; want none invoked, 2 waiting", inv.user, mb.UserMessageCount())
	}
	mb.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	// The actor hears of the resume (resumed) before the next message.
	if !slices.Equal(inv.user, []any{resumed{}, "u1", "u2"}) {
		t.Fatalf("resumed: invoked %v, want resumed, u1, u2", inv.user)
	}
}

// TestMailbox_PanicEscalates: a panic in a user message is escalated with
// that message, the child beside it is cleared, and the messages after it
// are still delivered.
func TestMailbox_PanicEscalates(t *testing.T) {
	mb, inv, d := newTestMailbox()
	child := actor.NewPID("test", "parent/child")
	bad := messages.Text("s", "bad")
	inv.panicOn = bad
	mb.PostUserMessage("first")
	mb.postFrom(child, bad) // taken between the two (see TestMailbox_ChildFramesNotBehindBacklog)
	mb.PostUserMessage("next")
	d.runAll()
	if !slices.Equal(inv.escalated, []any{bad}) {
		t.Fatalf("escalated %v, want the frame that panicked", inv.escalated)
	}
	if mb.from != nil {
		t.Fatalf("from = %v after the panic, want nil", mb.from)
	}
	if !slices.Equal(inv.user, []any{"first", any(bad), "next"}) || inv.from[2] != nil {
		t.Fatalf("invoked %v from %v, want first, bad, then next (no child)", inv.user, inv.from)
	}
}

// TestMailbox_ConcurrentProducers posts from several goroutines at once
// on goroutine-per-run scheduling (run it with -race): every message
// arrives, each producer's in its order.
func TestMailbox_ConcurrentProducers(t *testing.T) {
	const producers, each = 4, 2000
	mb := newMailbox()
	type msg struct{ producer, seq int }
	done := make(chan struct{})
	next := make([]int, producers)
	var bad []string
	got := 0
	mb.RegisterHandlers(invokerFunc(func(m any) {
		x := m.(msg)
		if x.seq != next[x.producer] {
			bad = append(bad, fmt.Sprintf("producer %d: got %d, want %d", x.producer, x.seq, next[x.producer]))
		}
		next[x.producer] = x.seq + 1
		if got++; got == producers*each {
			close(done)
		}
	}), actor.NewDefaultDispatcher(50))
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				mb.PostUserMessage(msg{p, i})
			}
		}()
	}
	wg.Wait()
	<-done
	if len(bad) > 0 {
		t.Fatalf("out of order: %v", bad[:min(len(bad), 5)])
	}
}

type invokerFunc func(any)

func (f invokerFunc) InvokeSystemMessage(any)  {}
func (f invokerFunc) InvokeUserMessage(m any)  { f(m) }
func (f invokerFunc) EscalateFailure(any, any) {}

// TestMailbox_BurstLeavesOneSegment: a burst far larger than a segment
// comes out whole and in order, and once it is drained the mailbox keeps
// a single segment of at most mailboxSegment entries, reused from its
// start.
func TestMailbox_BurstLeavesOneSegment(t *testing.T) {
	mb, inv, d := newTestMailbox()
	const burst = 10 * mailboxSegment
	for i := range burst {
		mb.PostUserMessage(i)
	}
	d.runAll()
	for i, m := range inv.user {
		if m != i {
			t.Fatalf("message %d is %v", i, m)
		}
	}
	if len(inv.user) != burst {
		t.Fatalf("%d messages delivered, want %d", len(inv.user), burst)
	}
	q := &mb.in
	if q.head != q.tail || q.spare != nil || len(q.head.e) > mailboxSegment || q.hi != 0 || q.ti != 0 {
		t.Fatalf("after the burst: head %p tail %p, segment of %d, read at %d, written at %d; want one rewound segment of at most %d",
			q.head, q.tail, len(q.head.e), q.hi, q.ti, mailboxSegment)
	}
	// Nothing delivered is still referenced by the mailbox.
	if slices.ContainsFunc(q.head.e, func(m any) bool { return m != nil }) || mb.batch != [mailboxBatch]entry{} {
		t.Fatalf("after the burst the mailbox still holds delivered messages: segment %v, batch %v", q.head.e, mb.batch)
	}
}

// TestQueue_StandingBacklogAllocatesNothing: a backlog that moves
// through a queue (as many messages taken as written, more than a
// segment queued all along) reuses the segments already read, so it
// allocates nothing once the queue holds full-size segments; and what
// is taken is what was written, in order.
func TestQueue_StandingBacklogAllocatesNothing(t *testing.T) {
	var q queue[childFrame]
	frames := make([]*messages.Frame, 3*mailboxSegment)
	for i := range frames {
		frames[i] = messages.Text("s", fmt.Sprint(i))
	}
	in, out := 0, 0
	write := func() { q.push(childFrame{f: frames[in%len(frames)]}); in++ }
	read := func() {
		if got := q.pop().f; got != frames[out%len(frames)] {
			t.Fatalf("entry %d is %v, want %v", out, got, frames[out%len(frames)])
		}
		out++
	}
	// A standing backlog of a segment and a half, in full-size segments.
	for range 4*mailboxSegment + mailboxSegment/2 {
		write()
	}
	for range 3 * mailboxSegment {
		read()
	}
	allocs := testing.AllocsPerRun(20, func() {
		for range 2 * mailboxSegment {
			write()
			read()
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per %d messages through a standing backlog, want 0", allocs, 2*mailboxSegment)
	}
	for q.n > 0 {
		read()
	}
	if q.spare != nil || q.head != q.tail {
		t.Errorf("drained queue keeps spare %p and head %p, tail %p; want one segment", q.spare, q.head, q.tail)
	}
}

// TestMailbox_StopAfterQueuedChildFrames: a stop written into the actor
// (protoactor's PoisonPill, bare or in an envelope) is taken after every
// child's frame queued before it, though the two queues are otherwise
// taken in turn; frames queued after a stop may come before or after it.
func TestMailbox_StopAfterQueuedChildFrames(t *testing.T) {
	mb, inv, d := newTestMailbox()
	child := actor.NewPID("test", "parent/child")
	f1, f2, f3, f4 := messages.Text("s", "1"), messages.Text("s", "2"), messages.Text("s", "3"), messages.Text("s", "4")
	stop1, stop2 := &actor.PoisonPill{}, &actor.MessageEnvelope{Message: &actor.PoisonPill{}}
	mb.PostUserMessage("a")
	mb.postFrom(child, f1)
	mb.postFrom(child, f2)
	mb.PostUserMessage(stop1)
	mb.postFrom(child, f3)
	mb.PostUserMessage(stop2)
	mb.postFrom(child, f4)
	mb.PostUserMessage("b")
	d.runAll()
	if len(inv.user) != 8 {
		t.Fatalf("invoked %v, want 8 messages", inv.user)
	}
	at := func(m any) int { return slices.Index(inv.user, m) }
	if at(stop1) < at(f2) || at(stop2) < at(f3) || at("a") > at(stop1) || at(stop1) > at(stop2) || at(stop2) > at("b") {
		t.Fatalf("invoked %v: want the first stop after frames 1 and 2, the second after frame 3, and a, the stops and b in order", inv.user)
	}
	if mb.UserMessageCount() != 0 {
		t.Fatalf("%d user messages left after the run", mb.UserMessageCount())
	}
}

// TestMailbox_ChildGoneAfterItsFrames: a child's end is taken after the
// frames it queued before, as a childGone with the child beside it.
func TestMailbox_ChildGoneAfterItsFrames(t *testing.T) {
	mb, inv, d := newTestMailbox()
	child := actor.NewPID("test", "parent/child")
	f1, f2 := messages.Text("s", "1"), messages.Text("s", "2")
	mb.postFrom(child, f1)
	mb.postFrom(child, f2)
	mb.postGone(child)
	mb.PostUserMessage("x")
	d.runAll()
	var kids []any
	for i, m := range inv.user {
		if inv.from[i] == child {
			kids = append(kids, m)
		}
	}
	if want := []any{f1, f2, childGone{}}; !slices.Equal(kids, want) || len(inv.user) != 4 {
		t.Fatalf("invoked %v, from the child %v; want %v from the child, and x", inv.user, kids, want)
	}
}

// TestMailbox_ConcurrentChildrenAndStops posts from several goroutines
// at once (run it with -race): messages written into the actor,
// children's frames, stops queued after some of them, and suspensions.
// Every message arrives, each producer's in its order, and each stop
// after the frames its producer queued before it.
func TestMailbox_ConcurrentChildrenAndStops(t *testing.T) {
	const producers, each = 4, 2000
	mb := newMailbox()
	type msg struct{ producer, seq int }
	var (
		mu    sync.Mutex
		after = map[*actor.PoisonPill]msg{} // each stop, and the last frame queued before it
	)
	kids := make([]*actor.PID, producers)
	for p := range kids {
		kids[p] = actor.NewPID("test", fmt.Sprintf("parent/%d", p))
	}
	done := make(chan struct{})
	next := make(map[*actor.PID][]int)
	var bad []string
	got, want := 0, producers*(2*each+(each+96)/97) // frames and stops
	count := func() {
		if got++; got == want {
			close(done)
		}
	}
	mb.RegisterHandlers(invokerFunc(func(m any) {
		if stop, ok := m.(*actor.PoisonPill); ok {
			mu.Lock()
			last := after[stop]
			mu.Unlock()
			if seqs := next[kids[last.producer]]; seqs == nil || seqs[last.producer] <= last.seq {
				seen := 0
				if seqs != nil {
					seen = seqs[last.producer]
				}
				bad = append(bad, fmt.Sprintf("a stop queued after frame %v came after %d of its producer's frames only", last, seen))
			}
			count()
			return
		}
		f := m.(*messages.Frame)
		var x msg
		fmt.Sscan(f.GetText(), &x.producer, &x.seq)
		seqs := next[mb.from] // nil: written into the actor
		if seqs == nil {
			seqs = make([]int, producers)
			next[mb.from] = seqs
		}
		if x.seq != seqs[x.producer] {
			bad = append(bad, fmt.Sprintf("from %v, producer %d: got %d, want %d", mb.from, x.producer, x.seq, seqs[x.producer]))
		}
		seqs[x.producer] = x.seq + 1
		count()
	}), actor.NewDefaultDispatcher(7))
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range each {
				mb.PostUserMessage(messages.Text("in", fmt.Sprint(p, i)))
			}
		}()
		go func() {
			defer wg.Done()
			for i := range each {
				mb.postFrom(kids[p], messages.Text("kid", fmt.Sprint(p, i)))
				if i%97 == 0 {
					stop := &actor.PoisonPill{}
					mu.Lock()
					after[stop] = msg{p, i}
					mu.Unlock()
					mb.PostUserMessage(stop)
					mb.PostSystemMessage(&actor.SuspendMailbox{})
					mb.PostSystemMessage(&actor.ResumeMailbox{})
				}
			}
		}()
	}
	wg.Wait()
	<-done
	if len(bad) > 0 {
		t.Fatalf("out of order: %v", bad[:min(len(bad), 5)])
	}
}

// countingInvoker records the mailbox's UserMessageCount as each user
// message posted is invoked, panics on panicOn, and suspends the mailbox when
// a message panics, as protoactor's EscalateFailure does while the
// supervisor decides.
type countingInvoker struct {
	mb      *mailbox
	counts  []int
	panicOn any
}

func (c *countingInvoker) InvokeSystemMessage(any) {}
func (c *countingInvoker) InvokeUserMessage(m any) {
	if m == (resumed{}) {
		return // the mailbox's own, no message posted to it
	}
	c.counts = append(c.counts, c.mb.UserMessageCount())
	if m == c.panicOn {
		panic("asked to")
	}
}
func (c *countingInvoker) EscalateFailure(any, any) {
	c.mb.PostSystemMessage(&actor.SuspendMailbox{})
}

// TestMailbox_UserMessageCountHoldsTheBatch: the messages the consumer
// has taken into its batch and not yet handled still wait, and
// UserMessageCount (protoactor's mailbox length gauge) counts them: while
// the first message of a batch is handled, the rest of the batch and
// the queue; while the mailbox is suspended after a message of a batch
// panicked, those after it and the queue. While a batch is worked
// through, the count may hold the messages of it already handled (at
// most mailboxBatch-1), never fewer than wait.
func TestMailbox_UserMessageCountHoldsTheBatch(t *testing.T) {
	mb := newMailbox()
	inv := &countingInvoker{mb: mb, panicOn: 2}
	d := &manualDispatcher{}
	mb.RegisterHandlers(inv, d)
	const n = 2*mailboxBatch + 1
	for i := range n {
		mb.PostUserMessage(i)
	}
	d.runAll()
	// Message 0 is handled with n-1 waiting, 1 with n-2; 2 panics, and
	// the mailbox is suspended with n-3 waiting.
	if got, want := inv.counts, []int{n - 1, n - 2, n - 3}; len(got) != len(want) || got[0] != want[0] || got[1] < want[1] || got[2] < want[2] {
		t.Fatalf("counts as messages 0 to 2 were handled: %v, want %v (at most %d more for 1 and 2)", got, want, mailboxBatch-1)
	}
	if got := mb.UserMessageCount(); got != n-3 {
		t.Fatalf("UserMessageCount = %d while suspended after message 2 of %d, want %d", got, n, n-3)
	}
	mb.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	if len(inv.counts) != n {
		t.Fatalf("%d messages handled after the resume, want %d", len(inv.counts), n)
	}
	for i, got := range inv.counts {
		if waiting := n - 1 - i; got < waiting || got > waiting+mailboxBatch-1 {
			t.Errorf("UserMessageCount = %d as message %d was handled, with %d waiting", got, i, waiting)
		}
	}
	if got := mb.UserMessageCount(); got != 0 {
		t.Fatalf("UserMessageCount = %d once all were handled, want 0", got)
	}
}

// TestMailbox_PostedBeforeHandlers: protoactor registers a new actor's
// process, so its id reaches its mailbox, before it hands the mailbox its
// handlers. A message posted in that gap (a background job of an earlier
// actor of the same id finishing) waits, without a panic, and is
// delivered after the Started system message the spawn posts next.
func TestMailbox_PostedBeforeHandlers(t *testing.T) {
	mb := newMailbox()
	mb.PostUserMessage("early")
	mb.postFrom(&actor.PID{Id: "child"}, messages.Text("s", "x"))
	inv := &recordingInvoker{mb: mb}
	d := &manualDispatcher{}
	mb.RegisterHandlers(inv, d)
	if len(d.runs) != 0 {
		t.Fatalf("%d runs scheduled by registering the handlers, want none before a post", len(d.runs))
	}
	mb.PostSystemMessage("started")
	d.runAll()
	if !slices.Equal(inv.system, []any{"started"}) || len(inv.user) != 2 || inv.user[0] != "early" {
		t.Fatalf("invoked system %v, user %v; want started, then early and the child's frame", inv.system, inv.user)
	}
}

// TestMailbox_PostedWhileHandlersRegister races posts with the
// registration of the handlers: every message is delivered once the
// Started system message is, and no post panics.
func TestMailbox_PostedWhileHandlersRegister(t *testing.T) {
	for range 200 {
		mb := newMailbox()
		inv := &recordingInvoker{mb: mb}
		runs := make(chan func(), 16)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			mb.PostUserMessage("early")
		}()
		mb.RegisterHandlers(inv, chanDispatcher(runs))
		mb.PostSystemMessage("started")
		wg.Wait()
		for len(inv.user) == 0 || len(inv.system) == 0 {
			(<-runs)()
		}
		if !slices.Equal(inv.system, []any{"started"}) || !slices.Equal(inv.user, []any{"early"}) {
			t.Fatalf("invoked system %v, user %v; want started and early", inv.system, inv.user)
		}
	}
}

// chanDispatcher hands scheduled runs to the test through a channel.
type chanDispatcher chan func()

func (d chanDispatcher) Schedule(fn func()) { d <- fn }
func (d chanDispatcher) Throughput() int    { return 300 }
