package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_StoppingDropsRestOfCallEarlierIncarnationAnswered: a
// restart answers the streaming call open at it (ERROR and END). The
// next incarnation, which keeps a child, is stopped, and waits for its
// child to stop: the chunk and completion of the answered call that its
// caller still sends meanwhile are that call's rest, dropped as the
// next incarnation would have dropped them, not refused as a new call
// (a second ERROR and END on a stream that had its END). A new call on
// the stream is refused.
func TestMux_StoppingDropsRestOfCallEarlierIncarnationAnswered(t *testing.T) {
	rt := startRuntime(t)
	child, childEntered, releaseChild := holdingChild(t)
	shells := make(chan *shell, 2)
	incarnations := 0
	mux, err := rt.StartMux(Spec{Name: "d", New: func() Logic {
		incarnations++
		first := incarnations == 1
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				shells <- c.(*shell)
				if first {
					return
				}
				ref, err := c.Spawn(child)
				if err != nil {
					c.Fail(err)
				}
				c.Send(ref, messages.Text("k", "hold"))
			case *messages.Frame:
				if m.GetText() == "boom" {
					panic("boom")
				}
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	mb := (<-shells).mb
	r, b := mustOpen(t, mux, "r"), mustOpen(t, mux, "b")
	t.Cleanup(r.Release)
	t.Cleanup(b.Release)
	if err := r.Send(messages.StreamingToolCall("r", "call-r", "t")); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(messages.Text("b", "boom")); err != nil {
		t.Fatal(err)
	}
	<-shells // the next incarnation
	<-childEntered
	waitDrained(mb)
	if got, want := queued(t, r, frameType), []string{"ERROR", "END"}; !slices.Equal(got, want) {
		t.Fatalf("stream r, open at the restart: got %q, want %q", got, want)
	}

	rt.System().Root.Stop(mux.pid) // waits for the held child
	if err := r.SendAll(messages.ToolArgChunk("r", "call-r", `{}`), messages.ToolComplete("r", "call-r")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got := queued(t, r, frameName); len(got) > 0 {
		t.Errorf("stream r, whose call a restart answered, got %q while the duplex stops, want nothing", got)
	}
	if err := r.Send(messages.ToolCall("r", "call-r2", "t", nil)); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := queued(t, r, frameType), []string{"ERROR", "END"}; !slices.Equal(got, want) {
		t.Errorf("a new call on r while the duplex stops: got %q, want %q (refused)", got, want)
	}
	releaseChild()
}
