package actors

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// stopProbe is the Logic of the duplex the test below stops. It records
// every message it is given (its children's frames through the
// ChildFrameReceiver fast path), and its stop; it answers each frame with
// END on its stream, except a TEXT "hold", for which it sends its
// mailbox to entered and waits for release, leaving the stream open;
// a caller's END, which ends the caller's input and owes nothing, it
// only records.
// With a child (child set), it spawns it at start and writes it a frame
// the child holds on, so that the duplex, once stopped, stays stopping
// until the test releases the child.
type stopProbe struct {
	child   Spec // zero: no child
	entered chan *mailbox
	release chan struct{}

	mu      sync.Mutex
	log     []string
	stopped bool
}

func (p *stopProbe) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		s = "after stop: " + s
	}
	p.log = append(p.log, s)
}

func (p *stopProbe) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		p.record("Started")
		if p.child.New != nil {
			child, err := c.Spawn(p.child)
			if err != nil {
				c.Fail(err)
			}
			c.Send(child, messages.Text("k", "hold"))
		}
	case *messages.Frame:
		p.record(m.GetStreamId() + ":" + m.GetText())
		if m.GetText() == "hold" {
			p.entered <- c.(*shell).mb
			<-p.release
			return
		}
		if m.GetType() != messages.FrameType_END {
			c.Emit(messages.End(m.GetStreamId()))
		}
	default:
		p.record(fmt.Sprintf("%T", msg))
	}
}

// ReceiveChildFrame records a child's frame: the shell's fast path for
// children's frames, past Receive.
func (p *stopProbe) ReceiveChildFrame(_ Context, _ Ref, f *messages.Frame) {
	p.record("child " + f.GetStreamId() + ":" + frameName(f))
}

func (p *stopProbe) OnFailure(Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, "stopped")
	p.stopped = true
}

// TestShell_NoFrameAfterStop: frames taken into the mailbox's batch with
// a stop (protoactor's PoisonPill, sent by the runtime's root or by the
// duplex's parent with Context.Stop), after it in that batch or in the
// next one, reach the Logic of the stopped duplex no more: it gets no
// call after it was stopped and emits nothing for them, and each stream
// gets exactly one closing answer (END from the Logic before the stop,
// ERROR and END from the stop for the stream left open). The mailbox
// hands frames to the shell directly, past protoactor's check that the
// actor has stopped, unless the system records metrics; with a child
// still stopping, the actor is stopping, not stopped, on either path,
// and a late frame that opens a stream (a new call, on stream a too,
// whose first call ended) is refused with ERROR and END, once a stream;
// without one, the actor has stopped, and its watchers know, before the
// late frames are taken: nothing more is emitted.
func TestShell_NoFrameAfterStop(t *testing.T) {
	for _, metrics := range []bool{false, true} {
		for _, withChild := range []bool{false, true} {
			for _, byParent := range []bool{false, true} {
				name := fmt.Sprintf("metrics=%v/child=%v/byParent=%v", metrics, withChild, byParent)
				t.Run(name, func(t *testing.T) { testNoFrameAfterStop(t, metrics, withChild, byParent) })
			}
		}
	}
}

func testNoFrameAfterStop(t *testing.T, metrics, withChild, byParent bool) {
	rt, system := startHostedRuntime(t, metrics)
	root := system.Root

	// The subscriber records what the duplex emits, in order, and tells
	// when the duplex has stopped (it watches it).
	rec := &frameRecorder{gone: make(chan struct{})}
	sub := root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))

	probe := &stopProbe{entered: make(chan *mailbox, 1), release: make(chan struct{})}
	childEntered, childRelease := make(chan struct{}), make(chan struct{})
	// Released at the latest when the test ends (before the runtime is
	// closed): a check that fails while they hold fails the test instead
	// of leaving the close waiting on them.
	releaseProbe := sync.OnceFunc(func() { close(probe.release) })
	releaseChild := sync.OnceFunc(func() { close(childRelease) })
	t.Cleanup(func() { releaseProbe(); releaseChild() })
	if withChild {
		probe.child = Duplex("k", func(*messages.Frame, func(*messages.Frame)) {
			close(childEntered)
			<-childRelease
		})
	}
	spec := Spec{Name: "d", Subscriber: RefOf(sub), New: func() Logic { return probe }}
	var target, stopper *actor.PID
	if byParent {
		// The parent spawns the duplex, and stops it when written a frame.
		refs := make(chan Ref, 1)
		parent, err := rt.Spawn(Spec{Name: "p", New: func() Logic {
			var d Ref
			return LogicFunc(func(c Context, msg any) {
				switch msg.(type) {
				case Started:
					var err error
					if d, err = c.Spawn(spec); err != nil {
						c.Fail(err)
					}
					refs <- d
				case *messages.Frame:
					c.Stop(d)
				}
			})
		}})
		if err != nil {
			t.Fatal(err)
		}
		target, stopper = (<-refs).pid, parent.pid
	} else {
		ref, err := rt.Spawn(spec)
		if err != nil {
			t.Fatal(err)
		}
		target = ref.pid
	}
	// Watched before it can stop (a watch on a stopped actor goes
	// through dead letters, whose throttle outlives the test).
	watching := make(chan struct{})
	root.Send(sub, watchReq{target, watching})
	<-watching
	if withChild {
		<-childEntered
	}

	root.Send(target, messages.Text("h", "hold"))
	mb := <-probe.entered
	if mb.next != mb.taken {
		t.Fatalf("the hold came in a batch with %d more messages: the batches below would differ", mb.taken-mb.next)
	}
	if got, want := mb.direct != nil, !metrics; got != want {
		t.Fatalf("frames handed to the shell directly: %v, want %v", got, want)
	}
	// Queued while the duplex holds its mailbox: a frame, the stop, and
	// five frames. The first batch is the frame, the stop and two
	// frames; the next, the other three.
	root.Send(target, messages.Text("a", "before"))
	if byParent {
		root.Send(stopper, messages.Text("x", "stop"))
	} else {
		root.Poison(target)
	}
	waitQueued(mb, 2, 0)
	for _, stream := range []string{"h", "a", "b", "c", "d"} {
		root.Send(target, messages.Text(stream, "late"))
	}
	waitQueued(mb, 7, 0)
	releaseProbe()
	waitDrained(mb) // it ran from the hold until then
	if withChild {
		// The child's ERROR and END come after the duplex stopped (with
		// the child's end handled first, a system message): they reach
		// its Logic no more either.
		releaseChild()
	}
	<-rec.gone
	waitDrained(mb)
	// Sent after everything the duplex emitted: the reply has it all.
	reply := make(chan []string, 1)
	root.Send(sub, reply)
	emitted := <-reply

	probe.mu.Lock()
	log := probe.log
	probe.mu.Unlock()
	if want := []string{"Started", "h:hold", "a:before", "stopped"}; !slices.Equal(log, want) {
		t.Errorf("the Logic got %q, want %q", log, want)
	}
	want := []string{"a:END", "h:ERROR(duplex stopped)", "h:END"}
	if withChild {
		// Stopping while the late frames came: each new call (a again,
		// b, c, d) is refused once; h, which the stop closed, is not.
		refused := "ERROR(" + stoppingText + ")"
		for _, stream := range []string{"a", "b", "c", "d"} {
			want = append(want, stream+":"+refused, stream+":END")
		}
	}
	if !slices.Equal(emitted, want) {
		t.Errorf("the duplex emitted %q, want %q", emitted, want)
	}
}

// waitDrained spins until mb is idle with nothing queued: everything
// queued to it before has been taken and handled, when the caller knows
// it was running meanwhile, or that it stopped.
func waitDrained(mb *mailbox) {
	for mb.status.Load() != mailboxIdle || mb.user.Load() != 0 || mb.sysN.Load() != 0 {
		runtime.Gosched()
	}
}

// watchReq asks a frameRecorder to watch pid, and to close done then.
type watchReq struct {
	pid  *actor.PID
	done chan struct{}
}

// frameRecorder is a protoactor actor that records the frames it gets
// as stream:name, replies with them to a chan []string, watches the
// actor a watchReq names and closes gone when that actor stops.
type frameRecorder struct {
	frames []string
	gone   chan struct{}
}

func (r *frameRecorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Frame:
		r.frames = append(r.frames, m.GetStreamId()+":"+frameName(m))
	case chan []string:
		m <- slices.Clone(r.frames)
	case watchReq:
		ctx.Watch(m.pid)
		close(m.done)
	case *actor.Terminated:
		close(r.gone)
	}
}
