package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// metaReplySpec is a duplex that answers a call's END with TEXT "served"
// and END, answers a META with a META "approval_refused" and no END (as
// the tools loop answers an approval it cannot apply, since d3fa5f6),
// and fails on TEXT "boom".
func metaReplySpec(started chan<- struct{}, mbs chan<- *mailbox) Spec {
	return Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				started <- struct{}{}
				mbs <- c.(*shell).mb
			case *messages.Frame:
				id := m.GetStreamId()
				switch m.GetType() {
				case messages.FrameType_TEXT:
					if m.GetText() == "boom" {
						panic("boom")
					}
				case messages.FrameType_END:
					c.Emit(messages.Text(id, "served"))
					c.Emit(messages.End(id))
				case messages.FrameType_META:
					c.Emit(messages.Meta(id, "approval_refused", []byte(`{}`)))
				}
			}
		})
	}}
}

// TestMux_NewCallAfterLateMetaAndRestartIsServed: a META that arrives
// on a stream after its call ended (a duplicate approval decision), then
// a restart of the duplex, then a new call on that stream: the new call
// is served. (A duplex-wide record of the calls a restart closed once
// took this call for the old one's late frames and never answered it.)
func TestMux_NewCallAfterLateMetaAndRestartIsServed(t *testing.T) {
	rt := startRuntime(t)
	started := make(chan struct{}, 2)
	mbs := make(chan *mailbox, 2)
	mux, err := rt.StartMux(metaReplySpec(started, mbs))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	mb := <-mbs
	s := mustOpen(t, mux, "s")
	t.Cleanup(s.Release)
	b := mustOpen(t, mux, "b")
	t.Cleanup(b.Release)

	if err := s.SendAll(messages.Text("s", "hi"), messages.End("s")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := queued(t, s, frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Fatalf("first call: got %q, want %q", got, want)
	}
	// A duplicate approval decision, after the call's END.
	if err := s.Send(messages.Meta("s", "approval", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	queued(t, s, frameName) // the refusal META
	if err := b.Send(messages.Text("b", "boom")); err != nil {
		t.Fatal(err)
	}
	<-started // the next incarnation
	mb = <-mbs
	waitDrained(mb)
	t.Logf("s after the restart: %q", queued(t, s, frameName))

	if err := s.SendAll(messages.Text("s", "again"), messages.End("s")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := queued(t, s, frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Errorf("a new call on s after the restart: got %q, want %q (it is never answered)", got, want)
	}
}
