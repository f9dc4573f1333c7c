package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_StreamReusedOnStoppingDuplex: stream ids repeat (an agent's
// run after run), so a caller that got its answer on a stream of a
// stopping duplex and calls again on the same id is refused again: a
// call is the frames up to the caller's END, and an opening frame after
// it is a new call. That holds for a stream refused while stopping (n),
// for a stream the stop closed after the caller had sent its END (h),
// and for one the stop closed before (g: its END comes late, then the
// new call). Frames of a call before its END get one answer, and late
// frames that open nothing (CANCEL, ABORT, TOOL_RESULT, TICK, END) none.
func TestMux_StreamReusedOnStoppingDuplex(t *testing.T) {
	rt, mux, probe, releaseChild := startHeldMux(t)

	// Before the stop: h is held and left open after its caller's END, g
	// too, without an END yet. Both stay open across the stop, which
	// closes them.
	open := func(id string) *MuxStream { return mustOpen(t, mux, id) }
	h, g := open("h"), open("g")
	if err := h.SendAll(messages.Text("h", "hold"), messages.End("h")); err != nil {
		t.Fatal(err)
	}
	mb := <-probe.entered
	close(probe.release)
	if err := g.Send(messages.Text("g", "hold")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	rt.System().Root.Stop(mux.pid)
	waitDrained(mb)

	// read returns what s has queued, without waiting: once the duplex's
	// mailbox is drained, everything it emitted is there.
	read := func(s *MuxStream) []string { return queued(t, s, frameName) }
	stopped := []string{"ERROR(duplex stopped)", "END"}
	for _, s := range []*MuxStream{h, g} {
		if got := read(s); !slices.Equal(got, stopped) {
			t.Errorf("stream %s, open at the stop: got %q, want %q", s.ID(), got, stopped)
		}
		s.Release()
	}

	// call sends frames on a stream opened for them and returns what the
	// duplex emitted on it once it has taken them all.
	call := func(id string, frames ...*messages.Frame) []string {
		t.Helper()
		s := open(id)
		defer s.Release()
		if err := s.SendAll(frames...); err != nil {
			t.Fatal(err)
		}
		waitDrained(mb)
		return read(s)
	}
	refused := []string{"ERROR(" + stoppingText + ")", "END"}
	result, err := messages.ToolResult("n", "c", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	late := []*messages.Frame{
		messages.Cancel("n", ""), messages.Abort("n"), result, messages.Tick("n"), messages.End("n"),
	}
	steps := []struct {
		name   string
		id     string
		frames []*messages.Frame
		want   []string
	}{
		{"first call on n", "n", []*messages.Frame{messages.Text("n", "late"), messages.Text("n", "again"), messages.End("n")}, refused},
		{"second call on n", "n", []*messages.Frame{messages.Text("n", "late"), messages.End("n")}, refused},
		{"late frames on n", "n", late, nil},
		{"third call on n", "n", []*messages.Frame{messages.Text("n", "late"), messages.End("n")}, refused},
		{"second call on h (its caller's END came before the stop)", "h", []*messages.Frame{messages.Text("h", "late"), messages.End("h")}, refused},
		{"g's late END, then a second call on g", "g", []*messages.Frame{messages.End("g"), messages.Text("g", "late"), messages.End("g")}, refused},
	}
	for _, step := range steps {
		if got := call(step.id, step.frames...); !slices.Equal(got, step.want) {
			t.Errorf("%s: got %q, want %q", step.name, got, step.want)
		}
	}
	releaseChild()
}

// TestMux_MetaAfterEndOnStoppingDuplex: an agent sends its approval
// decisions as META frames on the stream of its call after the call's
// END. Those of a call the stop closed, or refused while the duplex
// stops, are late frames of that call: dropped, not refused as a new
// call (a second ERROR and END), and the caller's next call on the same
// id is refused, not dropped as the rest of the call before it.
func TestMux_MetaAfterEndOnStoppingDuplex(t *testing.T) {
	rt, mux, probe, releaseChild := startHeldMux(t)
	open := func(id string) *MuxStream { return mustOpen(t, mux, id) }
	h := open("h")
	if err := h.SendAll(messages.Text("h", "hold"), messages.End("h")); err != nil {
		t.Fatal(err)
	}
	mb := <-probe.entered
	close(probe.release)
	waitDrained(mb)
	rt.System().Root.Stop(mux.pid)
	waitDrained(mb)

	read := func(s *MuxStream) []string { return queued(t, s, frameName) }
	approval := messages.Meta("h", "approval", []byte(`{}`))
	if err := h.Send(approval); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := read(h), []string{"ERROR(duplex stopped)", "END"}; !slices.Equal(got, want) {
		t.Errorf("a call closed by the stop, then its META: got %q, want %q (the stop's answer alone)", got, want)
	}
	h.Release()

	refused := []string{"ERROR(" + stoppingText + ")", "END"}
	for _, name := range []string{"the next call on h", "a call after the META of a refused one"} {
		s := open("h")
		if err := s.SendAll(messages.Text("h", "next"), messages.End("h")); err != nil {
			t.Fatal(err)
		}
		waitDrained(mb)
		if got := read(s); !slices.Equal(got, refused) {
			t.Errorf("%s: got %q, want %q", name, got, refused)
		}
		if err := s.Send(approval); err != nil {
			t.Fatal(err)
		}
		waitDrained(mb)
		if got := read(s); len(got) != 0 {
			t.Errorf("%s, then its META: got %q more, want nothing", name, got)
		}
		s.Release()
	}
	releaseChild()
}
