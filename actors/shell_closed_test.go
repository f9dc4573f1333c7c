package actors

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/persistence"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
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

// wantQueued checks what each stream of want has queued, frame types.
func wantQueued(t *testing.T, streams map[string]*MuxStream, when string, want map[string][]string) {
	t.Helper()
	for id, w := range want {
		if got := queued(t, streams[id], frameType); !slices.Equal(got, w) {
			t.Errorf("stream %s, %s: got %q, want %q", id, when, got, w)
		}
	}
}

// wantServed sends a new call on each of ids and checks it is served.
func wantServed(t *testing.T, mb *mailbox, streams map[string]*MuxStream, send func(...*messages.Frame), ids ...string) {
	t.Helper()
	for _, id := range ids {
		send(messages.Text(id, "again"), messages.End(id))
		waitDrained(mb)
		if got, want := queued(t, streams[id], frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
			t.Errorf("a new call on %s: got %q, want %q", id, got, want)
		}
	}
}

// TestMux_LateFramesOfClosedCallGetNoSecondAnswer: a restart answers
// the calls open at it with ERROR and END; the frames their callers sent
// after the frame that failed the duplex (queued behind it), up to each
// caller's END, are the closed calls' and reach no incarnation: a held
// call's TEXT and END (a), a streaming tool call's argument chunk, its
// tool_complete META and END (c), the failed call's own END (p). Each
// stream gets the restart's answer alone, and once the ENDs came the
// duplex keeps no record of them. A new call on each stream after that
// is served.
func TestMux_LateFramesOfClosedCallGetNoSecondAnswer(t *testing.T) {
	mb, shells, streams, send := closedCallMux(t, "a", "c", "p")
	send(messages.Text("a", "hold"), messages.StreamingToolCall("c", "c1", "t"), messages.Text("p", "boom"),
		messages.Text("a", "more"), messages.End("a"),
		messages.ToolArgChunk("c", "c1", "{}"), messages.ToolComplete("c", "c1"), messages.End("c"),
		messages.End("p"))
	next := <-shells
	waitDrained(mb)
	closed := []string{"ERROR", "END"} // the restart's answer alone
	wantQueued(t, streams, "closed by the restart, with its late frames", map[string][]string{"a": closed, "c": closed, "p": closed})
	if n := next.closed.len(); n != 0 {
		t.Errorf("the duplex still records %d closed calls after their callers' ENDs", n)
	}
	wantServed(t, mb, streams, send, "a", "c", "p")
}

// TestMux_WholeRequestAfterRestartIsServed: a whole request (a
// TOOL_CALL with its arguments) is a call whose input is complete: its
// caller sends no END. So the restart that closes it keeps no record of
// its stream, and the caller's next call on the stream, already queued
// behind the failure, is served (t). A streaming TOOL_CALL on a stream,
// after a whole one (u) or before (v), has input to come: its late
// argument chunk, tool_complete META and END are the closed call's.
func TestMux_WholeRequestAfterRestartIsServed(t *testing.T) {
	mb, shells, streams, send := closedCallMux(t, "t", "u", "v", "p")
	send(messages.ToolCall("t", "t1", "hold", nil),
		messages.ToolCall("u", "u1", "hold", nil), messages.StreamingToolCall("u", "u2", "echo"),
		messages.StreamingToolCall("v", "v1", "echo"), messages.ToolCall("v", "v2", "hold", nil),
		messages.Text("p", "boom"),
		messages.ToolCall("t", "t2", "echo", nil),
		messages.ToolArgChunk("u", "u2", "{}"), messages.ToolComplete("u", "u2"), messages.End("u"),
		messages.ToolArgChunk("v", "v1", "{}"), messages.ToolComplete("v", "v1"), messages.End("v"),
		messages.End("p"))
	next := <-shells
	waitDrained(mb)
	wantQueued(t, streams, "after the restart", map[string][]string{
		"t": {"ERROR", "END", "TOOL_RESULT", "END"}, "u": {"ERROR", "END"}, "v": {"ERROR", "END"}, "p": {"ERROR", "END"},
	})
	if n := next.closed.len(); n != 0 {
		t.Errorf("the duplex still records %d closed calls", n)
	}
}

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
	wantQueued(t, streams, "first restart", map[string][]string{
		"s": {"META"}, "z": {"META"}, "b": {"ERROR", "END"}, "e": {"ERROR", "END", "META"},
	})
	send(messages.Text("f", "boom"))
	<-shells
	waitDrained(mb)
	// Nothing for s, z and e: a META opened no call on them.
	wantQueued(t, streams, "second restart", map[string][]string{"s": nil, "z": nil, "e": nil, "f": {"ERROR", "END"}})
	wantServed(t, mb, streams, send, "s", "z", "e")
}

// TestMux_RefusedCallsEndGetsNoSecondAnswer and its persistent variant:
// a call opened while the duplex restarts (a sibling failed, under
// AllForOne, while its child holds) is refused with ERROR and END, though
// no incarnation sees it; its caller's END, sent once the next
// incarnation runs, is the refused call's and gets nothing. A persistent
// duplex recovers the calls its incarnations took, not one refused. A
// refused whole request (a TOOL_CALL) leaves no record: its caller sends
// no END. A new call on the stream after that is served.
func TestMux_RefusedCallsEndGetsNoSecondAnswer(t *testing.T) {
	testRefusedCallsEnd(t, false)
}

func TestMux_RefusedCallsEndGetsNoSecondAnswerPersistent(t *testing.T) {
	testRefusedCallsEnd(t, true)
}

func testRefusedCallsEnd(t *testing.T, persistent bool) {
	var provider persistence.Provider
	if persistent {
		store := memstore.New(nil)
		t.Cleanup(func() { store.Close() })
		p, err := durability.NewProvider(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		provider = p
	}
	rt, d, probe, mb, releaseChild := startRestartProbe(t, provider)
	restartProbed(t, rt, probe)

	n, w := mustOpen(t, d, "n"), mustOpen(t, d, "w")
	t.Cleanup(n.Release)
	t.Cleanup(w.Release)
	if err := n.Send(messages.Text("n", "hi")); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(messages.ToolCall("w", "w1", "t", nil)); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	for _, s := range []*MuxStream{n, w} {
		if got, want := queued(t, s, frameType), []string{"ERROR", "END"}; !slices.Equal(got, want) {
			t.Fatalf("a call opened on %s while d restarted: got %q, want %q", s.ID(), got, want)
		}
	}
	releaseChild()
	mb = <-probe.mb // the new incarnation has started
	if err := n.Send(messages.End("n")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got := queued(t, n, frameName); len(got) != 0 {
		t.Errorf("the refused call's END, after the restart: got %q, want nothing (it was answered)", got)
	}
	// w's call, a whole request, was complete: no END of it is to come.
	if c := probe.shell.closed.len(); c != 0 {
		t.Errorf("the duplex still records %d closed calls", c)
	}
	if err := n.SendAll(messages.Text("n", "again"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := queued(t, n, frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
		t.Errorf("a new call on n: got %q, want %q", got, want)
	}
}
