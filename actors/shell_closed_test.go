package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// closedCallSpec is a duplex that answers as a request/response Logic
// does (the tools loop, a model): a TEXT "hold" opens a call that it
// holds (its caller's END gets no answer); the caller's END of any other
// call gets TEXT "served" and END; a CANCEL of a held call gets ERROR
// "cancelled" and END; a META gets a META "approval_refused" and no END
// (a decision for a call it does not hold); a TEXT "boom" panics. As a
// tool does, it answers a TOOL_CALL (whole, or streaming once its
// arguments are complete) with a TOOL_RESULT and END, but holds a call
// to the tool "hold". Each incarnation sends its shell to shells as it
// starts.
func closedCallSpec(shells chan<- *shell) Spec {
	return Spec{Name: "d", New: func() Logic {
		held := map[string]bool{}
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				shells <- c.(*shell)
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
				case messages.FrameType_CANCEL:
					if held[id] {
						delete(held, id)
						c.Emit(messages.Error(id, "cancelled"))
						c.Emit(messages.End(id))
					}
				case messages.FrameType_META:
					if !m.IsToolComplete() {
						c.Emit(messages.Meta(id, "approval_refused", []byte(`{}`)))
						return
					}
					c.Emit(messages.RawToolResult(id, m.GetToolCallId(), "t", nil))
					c.Emit(messages.End(id))
				case messages.FrameType_TOOL_CALL:
					if m.GetName() == "hold" || m.IsStreamingToolCall() {
						return
					}
					c.Emit(messages.RawToolResult(id, m.GetToolCallId(), m.GetName(), nil))
					c.Emit(messages.End(id))
				}
			}
		})
	}}
}

// closedCallMux starts closedCallSpec on a Mux with a stream open for
// each of ids, and returns the duplex's mailbox, the channel of its
// incarnations' shells as they start (the first taken), and a send that
// writes frames in order, each on the stream of its id.
func closedCallMux(t *testing.T, ids ...string) (mb *mailbox, shells chan *shell, streams map[string]*MuxStream, send func(...*messages.Frame)) {
	t.Helper()
	rt := startRuntime(t)
	shells = make(chan *shell, 1)
	mux, err := rt.StartMux(closedCallSpec(shells))
	if err != nil {
		t.Fatal(err)
	}
	mb = (<-shells).mb
	streams = map[string]*MuxStream{}
	for _, id := range ids {
		s := mustOpen(t, mux, id)
		t.Cleanup(s.Release)
		streams[id] = s
	}
	send = func(frames ...*messages.Frame) {
		t.Helper()
		for _, f := range frames {
			if err := streams[f.GetStreamId()].Send(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return mb, shells, streams, send
}

func frameType(f *messages.Frame) string { return f.GetType().String() }

func approval(id string) *messages.Frame { return messages.Meta(id, "approval", []byte(`{}`)) }

// TestMux_MetaOpensNoCall: a META on a stream with no call open (an
// approval decision after its call's END, on a stream never used, or on
// a stream whose call a restart closed after its caller's END) reaches
// the Logic, which answers it with a META and no END, and opens nothing:
// no restart answers those streams with ERROR and END, and a new call
// on each is served.
func TestMux_MetaOpensNoCall(t *testing.T) {
	mb, shells, streams, send := closedCallMux(t, "s", "z", "e", "b", "f")
	send(messages.Text("s", "hi"), messages.End("s"))
	waitDrained(mb)
	if got, want := queued(t, streams["s"], frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Fatalf("first call on s: got %q, want %q", got, want)
	}
	// e's caller ended its input; the call is held when the restart comes.
	send(approval("s"), approval("z"), messages.Text("e", "hold"), messages.End("e"), messages.Text("b", "boom"),
		approval("e"))
	<-shells
	waitDrained(mb)
	for id, want := range map[string][]string{
		"s": {"META"}, "z": {"META"}, "b": {"ERROR", "END"}, "e": {"ERROR", "END", "META"},
	} {
		if got := queued(t, streams[id], frameType); !slices.Equal(got, want) {
			t.Errorf("stream %s, first restart: got %q, want %q", id, got, want)
		}
	}
	send(messages.Text("f", "boom"))
	<-shells
	waitDrained(mb)
	for id, want := range map[string][]string{"s": nil, "z": nil, "e": nil, "f": {"ERROR", "END"}} {
		if got := queued(t, streams[id], frameType); !slices.Equal(got, want) {
			t.Errorf("stream %s, second restart: got %q, want %q (a META opened a call)", id, got, want)
		}
	}
	for _, id := range []string{"s", "z", "e"} {
		send(messages.Text(id, "again"), messages.End(id))
		waitDrained(mb)
		if got, want := queued(t, streams[id], frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
			t.Errorf("a new call on %s: got %q, want %q", id, got, want)
		}
	}
}
