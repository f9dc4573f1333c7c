package actors

import (
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// restartProbe is the Logic of a duplex that a sibling's failure
// restarts (AllForOne) while its child holds: at start it spawns child
// and writes it a frame; it answers a caller's END with TEXT "served"
// and END, and a whole TOOL_CALL with a TOOL_RESULT (its payload the
// call's id) and END, both with the call's id; its first incarnation's
// end closes ending. mb is the duplex's mailbox.
type restartProbe struct {
	child  Spec
	ending func()
	mb     chan *mailbox
}

func (p *restartProbe) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		select {
		case p.mb <- c.(*shell).mb:
		default:
		}
		child, err := c.Spawn(p.child)
		if err != nil {
			c.Fail(err)
		}
		c.Send(child, messages.Text("k", "hold"))
	case *messages.Frame:
		switch {
		case m.GetType() == messages.FrameType_END:
			c.Emit(messages.Text(m.GetStreamId(), "served"))
			c.Emit(messages.End(m.GetStreamId()))
		case m.GetType() == messages.FrameType_TOOL_CALL && !m.IsStreamingToolCall():
			c.Emit(messages.RawToolResult(m.GetStreamId(), m.GetToolCallId(), m.GetName(), []byte(`"`+m.GetToolCallId()+`"`)))
			c.Emit(endOf(m.GetStreamId(), m.GetToolCallId()))
		}
	}
}

func (p *restartProbe) OnFailure(Context, error) { p.ending() }

// heldRestart starts a duplex d of a restartProbe under an all-for-one
// supervisor, its child holding, on a runtime closed (and checked for
// leaks) at the test's end. mb is d's first mailbox; open opens a stream
// on d, released at the test's end; restart makes a sibling panic and
// returns once d's first incarnation has ended (d restarts, its child
// holding); release lets the restart finish and returns once the next
// incarnation has started.
func heldRestart(t *testing.T) (mb *mailbox, open func(id string) *MuxStream, restart, release func()) {
	t.Helper()
	_, mb, open, restart, release = heldRestartMux(t)
	return mb, open, restart, release
}

// heldRestartMux is heldRestart, with the Mux of d.
func heldRestartMux(t *testing.T) (d *Mux, mb *mailbox, open func(id string) *MuxStream, restart, release func()) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne})})
	var childEntered <-chan struct{}
	var releaseChild func()
	probe := &restartProbe{mb: make(chan *mailbox, 1)}
	probe.child, childEntered, releaseChild = holdingChild(t)
	ending := make(chan struct{})
	probe.ending = sync.OnceFunc(func() { close(ending) })
	d, err := rt.StartMux(Spec{Name: "d", New: func() Logic { return probe }})
	if err != nil {
		t.Fatal(err)
	}
	<-childEntered
	mb = <-probe.mb
	open = func(id string) *MuxStream {
		s := mustOpen(t, d, id)
		t.Cleanup(s.Release)
		return s
	}
	restart = func() {
		x, err := rt.Start(Spec{Name: "x", New: func() Logic {
			return LogicFunc(func(_ Context, msg any) {
				if _, ok := msg.(*messages.Frame); ok {
					panic("boom")
				}
			})
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Send(messages.Text("p", "panic")); err != nil {
			t.Fatal(err)
		}
		<-ending
	}
	release = func() {
		releaseChild()
		<-probe.mb
	}
	return d, mb, open, restart, release
}

// TestMux_NewStreamOnRestartingDuplex: a duplex restarted without
// having failed (a sibling failed, under AllForOne) keeps taking frames
// while its children stop. A call opened then is refused at once with
// ERROR and END, as a call open at the restart is closed: without the
// failure kind StoppedKind, for the duplex comes back, and a call after
// the restart is served.
func TestMux_NewStreamOnRestartingDuplex(t *testing.T) {
	mb, open, restart, release := heldRestart(t)
	o := open("o")
	if err := o.Send(messages.Text("o", "hi")); err != nil {
		t.Fatal(err)
	}
	restart() // d's first incarnation has ended: d restarts, its child holding

	n := open("n")
	if err := n.SendAll(messages.Text("n", "hi"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	read := func(s *MuxStream) []string {
		return queued(t, s, func(f *messages.Frame) string { return frameName(f) + "[" + f.GetMeta().GetFailureKind() + "]" })
	}
	if got, want := read(o), []string{"ERROR(restarted)[]", "END[]"}; !slices.Equal(got, want) {
		t.Errorf("a call open at the restart got %q, want %q", got, want)
	}
	if got, want := read(n), []string{"ERROR(" + restartingText + ")[]", "END[]"}; !slices.Equal(got, want) {
		t.Errorf("a call opened while d restarted got %q, want %q (refused, not stopped for good)", got, want)
	}

	release() // the new incarnation has started
	m := open("m")
	if err := m.SendAll(messages.Text("m", "hi"), messages.End("m")); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1] != "END" {
		f, err := m.Recv(ctx)
		if err != nil {
			t.Fatalf("stream m: %v after %q", err, got)
		}
		got = append(got, frameName(f))
	}
	if want := []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Errorf("a call after the restart got %q, want %q", got, want)
	}
}
