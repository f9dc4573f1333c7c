package actors

import (
	"fmt"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_LateFramesOfCallClosedByRestart: a restart answers the calls
// open at it with ERROR and END. Their callers' frames that open no call
// and come after the next incarnation started (the END of a call still
// being sent, the CANCEL and END of a held one, the END of the call that
// failed the duplex) are that answered call's: the next incarnation's
// Logic does not get them, so it does not answer them a second time (a
// second END on the stream), also after more than one restart. A frame
// that opens a call on such a stream is a new call and is served, with
// or without the old call's END before it (the streaming TOOL_CALL of a
// call runner ends at its tool_complete, and its caller sends no END),
// and so is every call after.
func TestMux_LateFramesOfCallClosedByRestart(t *testing.T) {
	for _, restarts := range []int{1, 2} {
		t.Run(fmt.Sprintf("restarts=%d", restarts), func(t *testing.T) {
			mb, shells, streams, send := closedCallMux(t, "a", "h", "r", "b", "f")
			send(messages.Text("a", "hi"), messages.Text("h", "hold"), messages.StreamingToolCall("r", "call-r", "t"),
				messages.Text("b", "boom"))
			<-shells
			if restarts == 2 {
				send(messages.Text("f", "boom"))
				<-shells
			}
			waitDrained(mb)
			for _, id := range []string{"a", "h", "r", "b"} {
				if got, want := queued(t, streams[id], frameType), []string{"ERROR", "END"}; !slices.Equal(got, want) {
					t.Fatalf("stream %s, open at the restart: got %q, want %q", id, got, want)
				}
			}

			send(messages.End("a"), messages.Cancel("h", ""), messages.End("h"), messages.End("b"),
				messages.ToolCall("r", "call-r2", "t", nil))
			waitDrained(mb)
			for id, want := range map[string][]string{
				"a": nil, "h": nil, "b": nil, "r": {"TOOL_RESULT", "END"},
			} {
				if got := queued(t, streams[id], frameType); !slices.Equal(got, want) {
					t.Errorf("stream %s after the restart: got %q, want %q", id, got, want)
				}
			}

			for _, id := range []string{"a", "h", "b", "r"} {
				send(messages.Text(id, "again"), messages.End(id))
				waitDrained(mb)
				if got, want := queued(t, streams[id], frameName), []string{"TEXT(served)", "END"}; !slices.Equal(got, want) {
					t.Errorf("a new call on %s: got %q, want %q", id, got, want)
				}
			}
		})
	}
}

// TestMux_RefusedCallsEndAfterRestart: a call opened while a duplex
// restarts (its children stopping) is refused with ERROR and END; its
// caller's END, sent once the next incarnation has started, is the
// refused call's and gets no second answer from it. The next call on
// the stream is served.
func TestMux_RefusedCallsEndAfterRestart(t *testing.T) {
	mb, open, restart, release := heldRestart(t)
	restart() // d's first incarnation has ended: d restarts, its child holding

	n := open("n")
	if err := n.Send(messages.Text("n", "hi")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	if got, want := queued(t, n, frameName), []string{"ERROR(" + restartingText + ")", "END"}; !slices.Equal(got, want) {
		t.Fatalf("a call opened while d restarted got %q, want %q", got, want)
	}

	release() // the new incarnation has started
	if err := n.Send(messages.End("n")); err != nil {
		t.Fatal(err)
	}
	// m's answer comes after whatever n's END got: the duplex takes and
	// answers its frames in order.
	m := open("m")
	if err := m.SendAll(messages.Text("m", "hi"), messages.End("m")); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	recvCall := func(s *MuxStream) []string {
		t.Helper()
		var got []string
		for len(got) == 0 || got[len(got)-1] != "END" {
			f, err := s.Recv(ctx)
			if err != nil {
				t.Fatalf("stream %s: %v after %q", s.ID(), err, got)
			}
			got = append(got, frameName(f))
		}
		return got
	}
	served := []string{"TEXT(served)", "END"}
	if got := recvCall(m); !slices.Equal(got, served) {
		t.Errorf("a call after the restart got %q, want %q", got, served)
	}
	if got := queued(t, n, frameName); len(got) != 0 {
		t.Errorf("the refused call's END, after the restart, got %q, want nothing (its call has its answer)", got)
	}
	if err := n.SendAll(messages.Text("n", "again"), messages.End("n")); err != nil {
		t.Fatal(err)
	}
	if got := recvCall(n); !slices.Equal(got, served) {
		t.Errorf("the next call on n got %q, want %q", got, served)
	}
}
