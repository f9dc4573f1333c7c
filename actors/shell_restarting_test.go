package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/persistence"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// restartProbe is the Logic of a duplex that a sibling's failure
// restarts (AllForOne) while its child holds: at start it spawns child
// and writes it a frame; it answers a caller's END with TEXT "served"
// and END ("unrecovered" instead when durable and its state's recovery
// has not completed); its first incarnation's end closes ending. mb is
// the duplex's mailbox.
type restartProbe struct {
	child     Spec
	ending    func()
	mb        chan *mailbox
	durable   bool
	recovered bool
}

func (p *restartProbe) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case *persistence.ReplayComplete:
		p.recovered = true
	case Started:
		p.recovered = false
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
		if m.GetType() == messages.FrameType_END {
			text := "served"
			if p.durable && !p.recovered {
				text = "unrecovered"
			}
			c.Emit(messages.Text(m.GetStreamId(), text))
			c.Emit(messages.End(m.GetStreamId()))
		}
	}
}

func (p *restartProbe) OnFailure(Context, error) { p.ending() }

// restartingDuplex starts a Mux on a restartProbe (durable: with
// persistence) and a sibling whose
// failure restarts it (AllForOne), and returns once the duplex is
// restarting, its child holding until releaseChild, with its mailbox
// and stream o, whose call was open at the restart (its caller's input
// too).
func restartingDuplex(t *testing.T, durable bool) (rt *Runtime, d *Mux, mb *mailbox, releaseChild func(), o *MuxStream) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	rt = closedRuntime(t, &RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne})})
	var childEntered <-chan struct{}
	probe := &restartProbe{mb: make(chan *mailbox, 1), durable: durable}
	probe.child, childEntered, releaseChild = holdingChild(t)
	ending := make(chan struct{})
	probe.ending = sync.OnceFunc(func() { close(ending) })
	spec := Spec{Name: "d", New: func() Logic { return probe }}
	if durable {
		spec.Persistence = stateProvider{persistence.NewInMemoryProvider(1)}
	}
	d, err := rt.StartMux(spec)
	if err != nil {
		t.Fatal(err)
	}
	<-childEntered
	mb = <-probe.mb
	o = openStream(t, d, "o")
	if err := o.Send(messages.Text("o", "hi")); err != nil {
		t.Fatal(err)
	}
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
	<-ending // d's first incarnation has ended: d is restarting, its child holding
	return rt, d, mb, releaseChild, o
}

// stateProvider is a persistence.Provider of one state.
type stateProvider struct{ persistence.ProviderState }

func (p stateProvider) GetState() persistence.ProviderState { return p.ProviderState }

// openStream opens id on d, released when the test ends.
func openStream(t *testing.T, d *Mux, id string) *MuxStream {
	t.Helper()
	s, err := d.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	return s
}

// TestMux_NewStreamOnRestartingDuplex: a duplex restarted without
// having failed (a sibling failed, under AllForOne) keeps taking frames
// while its children stop. A call opened then is neither run by the
// ending incarnation nor refused as if the duplex had stopped for good:
// it is handed to the new incarnation, which serves it, frames in their
// order. A stream closed at the restart (the caller's input still open)
// gets its late frames dropped, not given to the new incarnation. A
// durable duplex's new incarnation is given the held call once it has
// recovered its state.
func TestMux_NewStreamOnRestartingDuplex(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) { testNewStreamOnRestartingDuplex(t, durable) })
	}
}

func testNewStreamOnRestartingDuplex(t *testing.T, durable bool) {
	_, d, mb, releaseChild, o := restartingDuplex(t, durable)
	n := openStream(t, d, "n")
	if err := n.SendAll(messages.Text("n", "hi"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	if err := o.SendAll(messages.Text("o", "late"), messages.End("o")); err != nil {
		t.Fatal(err)
	}
	// Taken while d restarts: its child holds until released.
	waitDrained(mb)
	releaseChild()

	ctx := testContext(t)
	readAll := func(s *MuxStream) []string {
		t.Helper()
		var got []string
		for len(got) == 0 || got[len(got)-1] != "END" {
			f, err := s.Recv(ctx)
			if err != nil {
				t.Fatalf("stream %s: %v after %q", s.ID(), err, got)
			}
			name := frameName(f)
			if f.GetType() == messages.FrameType_ERROR {
				name += "[" + f.GetMeta().GetFailureKind() + "]"
			}
			got = append(got, name)
		}
		return got
	}
	if got, want := readAll(n), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Errorf("a call opened while d restarted got %q, want %q (served by the new incarnation)", got, want)
	}
	if got, want := readAll(o), []string{"ERROR(restarted)[]", "END"}; !slices.Equal(got, want) {
		t.Errorf("a call open at the restart got %q, want %q", got, want)
	}
	// The new incarnation serves, and gave o's late frames no answer:
	// after a call served on another stream, o has nothing more.
	m := openStream(t, d, "m")
	if err := m.SendAll(messages.Text("m", "hi"), messages.End("m")); err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(m), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Errorf("a call after the restart got %q, want %q", got, want)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if f, err := o.Recv(done); !errors.Is(err, context.Canceled) {
		t.Errorf("stream o, closed at the restart, got %v, %v after its late frames; want nothing", f, err)
	}
}

// TestMux_RestartingDuplexStopped: a call held for the next incarnation
// of a restarting duplex is refused, as one opened while it stops, when
// the duplex is stopped before it has restarted (its child still
// holding), not left unanswered.
func TestMux_RestartingDuplexStopped(t *testing.T) {
	rt, d, mb, releaseChild, _ := restartingDuplex(t, false)
	n := openStream(t, d, "n")
	if err := n.SendAll(messages.Text("n", "hi"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	rt.System().Root.Stop(d.pid)
	waitDrained(mb)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var got []string
	for {
		f, err := n.Recv(done)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Recv: %v after %q", err, got)
			}
			break
		}
		got = append(got, frameName(f)+"["+f.GetMeta().GetFailureKind()+"]")
	}
	if want := []string{"ERROR(" + stoppingText + ")[" + StoppedKind + "]", "END[]"}; !slices.Equal(got, want) {
		t.Errorf("a call held while d restarted, d then stopped: got %q, want %q", got, want)
	}
	releaseChild()
	if f, err := n.Recv(testContext(t)); !errors.Is(err, ErrDuplexStopped) {
		t.Errorf("Recv once the duplex stopped: %v, %v; want ErrDuplexStopped", f, err)
	}
}
