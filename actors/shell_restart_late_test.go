package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// answeringSpec is a duplex that answers the frames of each call (a TEXT
// "hold" opens one and leaves it open, its caller's END too) and fails
// on a TEXT "boom": an END with TEXT "served" and END, a META with TEXT
// "meta" and END, a CANCEL with ERROR "cancelled" and END. Each
// incarnation sends its mailbox to started as it starts.
func answeringSpec(started chan<- *mailbox) Spec {
	return Spec{Name: "d", New: func() Logic {
		held := map[string]bool{}
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				started <- c.(*shell).mb
			case *messages.Frame:
				id := m.GetStreamId()
				switch m.GetType() {
				case messages.FrameType_TEXT:
					switch m.GetText() {
					case "boom":
						panic("boom")
					case "hold":
						held[id] = true
					}
				case messages.FrameType_END:
					if !held[id] {
						c.Emit(messages.Text(id, "served"))
						c.Emit(messages.End(id))
					}
				case messages.FrameType_META:
					c.Emit(messages.Text(id, "meta"))
					c.Emit(messages.End(id))
				case messages.FrameType_CANCEL:
					c.Emit(messages.Error(id, "cancelled"))
					c.Emit(messages.End(id))
				}
			}
		})
	}}
}

// TestMux_LateFramesOfCallClosedByRestart: the calls open when a duplex
// fails are answered by its restart (ERROR and END), once: their late
// frames, queued behind the failure, reach the next incarnation, and get
// nothing from it, as they would get nothing from the duplex while it
// restarts. That holds for a call whose caller's END had not come (a: a
// TEXT, a CANCEL, its END, and an approval META after it; p, the call
// that failed, whose END comes later) and for one whose END had come (e:
// a META and a CANCEL). A call after the caller's END on the same id, and
// a call on a new id, are served by the new incarnation.
func TestMux_LateFramesOfCallClosedByRestart(t *testing.T) {
	rt := startRuntime(t)
	started := make(chan *mailbox, 1)
	mux, err := rt.StartMux(answeringSpec(started))
	if err != nil {
		t.Fatal(err)
	}
	mb := <-started
	streams := map[string]*MuxStream{}
	for _, id := range []string{"a", "e", "p", "n"} {
		s := mustOpen(t, mux, id)
		t.Cleanup(s.Release)
		streams[id] = s
	}
	send := func(frames ...*messages.Frame) {
		t.Helper()
		for _, f := range frames {
			if err := streams[f.GetStreamId()].Send(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	approval := func(id string) *messages.Frame { return messages.Meta(id, "approval", []byte(`{}`)) }
	// All from one sender, in order: the frames after "boom" are taken
	// after the failure, by the next incarnation.
	send(messages.Text("a", "hold"), messages.Text("e", "hold"), messages.End("e"), messages.Text("p", "boom"),
		messages.Text("a", "more"), messages.Cancel("a", ""), messages.End("a"), approval("a"),
		approval("e"), messages.Cancel("e", ""))
	<-started // the next incarnation
	waitDrained(mb)

	kind := func(f *messages.Frame) string { return f.GetType().String() }
	closed := []string{"ERROR", "END"}
	for _, id := range []string{"a", "e", "p"} {
		if got := queued(t, streams[id], kind); !slices.Equal(got, closed) {
			t.Errorf("call %s, open at the restart, and its late frames: got %q, want %q (the restart's answer alone)",
				id, got, closed)
		}
	}

	served := []string{"TEXT(served)", "END"}
	steps := []struct {
		name   string
		frames []*messages.Frame
		id     string
		want   []string
	}{
		{"p's late END, then nothing more", []*messages.Frame{messages.End("p")}, "p", nil},
		{"a new call on a", []*messages.Frame{messages.Text("a", "again"), messages.End("a")}, "a", served},
		{"a new call on e", []*messages.Frame{messages.Text("e", "again"), messages.End("e")}, "e", served},
		{"a new call on p", []*messages.Frame{messages.Text("p", "again"), messages.End("p")}, "p", served},
		{"a call on a new stream", []*messages.Frame{messages.Text("n", "hi"), messages.End("n")}, "n", served},
		{"a META after a served call", []*messages.Frame{approval("n")}, "n", []string{"TEXT(meta)", "END"}},
	}
	for _, step := range steps {
		send(step.frames...)
		waitDrained(mb)
		if got := queued(t, streams[step.id], frameName); !slices.Equal(got, step.want) {
			t.Errorf("%s: got %q, want %q", step.name, got, step.want)
		}
	}
}
