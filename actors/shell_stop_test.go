package actors

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/messages"
)

// startRuntime starts a runtime that the test closes, checking that no
// goroutine outlives it.
func startRuntime(t *testing.T) *Runtime {
	t.Helper()
	before := goleak.IgnoreCurrent()
	rt, err := NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Error(err)
		}
		goleak.VerifyNone(t, before)
	})
	return rt
}

// waitQueued spins until mb holds at least user messages and system
// system messages: the mailbox's counters are the signal that what the
// test arranged is queued (its consumer is held by the test meanwhile).
func waitQueued(mb *mailbox, user, system int32) {
	for mb.user.Load() < user || mb.sysN.Load() < system {
		runtime.Gosched()
	}
}

// frameName is how the tests below record a frame: its type, and its
// text for TEXT, TOOL_RESULT and ERROR frames.
func frameName(f *messages.Frame) string {
	switch t := f.GetType(); t {
	case messages.FrameType_TEXT, messages.FrameType_ERROR:
		return t.String() + "(" + f.GetText() + ")"
	case messages.FrameType_TOOL_RESULT:
		return t.String() + "(" + string(f.GetPayload()) + ")"
	default:
		return t.String()
	}
}

// answering is a duplex that answers every frame with a TEXT "r" and
// END on its stream.
func answering(name string) Spec {
	return Duplex(name, func(f *messages.Frame, emit func(*messages.Frame)) {
		emit(messages.Text(f.GetStreamId(), "r"))
		emit(messages.End(f.GetStreamId()))
	})
}

// holdingParent is a Logic with one child, spawned from spec at start.
// A frame written into it goes to the child, then (when stop is set)
// the child is stopped, and the Logic holds its mailbox until release
// is closed, having sent its mailbox to entered. What it gets from the
// child, and the child's stop, go to got; its own end closes done.
type holdingParent struct {
	spec    Spec
	stop    bool
	child   Ref
	entered chan *mailbox
	release chan struct{}
	got     chan string
	done    chan struct{}
}

func newHoldingParent(spec Spec, stop bool) *holdingParent {
	return &holdingParent{
		spec: spec, stop: stop,
		entered: make(chan *mailbox, 1), release: make(chan struct{}),
		got: make(chan string, 16), done: make(chan struct{}),
	}
}

func (p *holdingParent) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		child, err := c.Spawn(p.spec)
		if err != nil {
			c.Fail(err)
		}
		p.child = child
	case *messages.Frame:
		c.Send(p.child, m)
		if p.stop {
			c.Stop(p.child)
		}
		p.entered <- c.(*shell).mb
		<-p.release
	case ChildFrame:
		p.got <- frameName(m.Frame)
	case ChildStopped:
		p.got <- "STOPPED"
	}
}

func (p *holdingParent) OnFailure(Context, error) { close(p.done) }

// collect reads what p got up to and including last.
func (p *holdingParent) collect(last string) []string {
	var got []string
	for {
		s := <-p.got
		got = append(got, s)
		if s == last {
			return got
		}
	}
}

// TestShell_StopAfterQueuedChildFrames: Context.Stop (protoactor's
// PoisonPill) stops an actor after the messages already queued to it,
// its children's frames among them. Here a duplex's child has answered
// (TEXT and END, in the duplex's children's queue) before the duplex is
// stopped: the duplex gets both frames before it stops, though its
// mailbox otherwise takes from its input and its children's queue in
// turn.
func TestShell_StopAfterQueuedChildFrames(t *testing.T) {
	rt := startRuntime(t)
	p := newHoldingParent(answering("g"), false)
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic { return p }})
	if err != nil {
		t.Fatal(err)
	}
	rt.System().Root.Send(ref.pid, messages.Text("s", "go"))
	mb := <-p.entered
	waitQueued(mb, 2, 0)             // the child's TEXT and END
	rt.System().Root.Poison(ref.pid) // after them
	waitQueued(mb, 3, 0)
	close(p.release)
	<-p.done
	close(p.got)
	var got []string
	for s := range p.got {
		got = append(got, s)
	}
	if want := []string{"TEXT(r)", "END"}; !slices.Equal(got, want) {
		t.Errorf("the stopped duplex got %v from its child, want %v", got, want)
	}
}
