package actors

import (
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// The tests here hold that the ERROR and END the runtime writes for a
// call it knows carry the call's tool-call id, so that a caller with
// several calls on a stream can tell which one they answer: a restart
// or stop of a stream of several calls answers each with its own pair,
// and only a call whose frames carry no id gets a pair with none.

// withCallID is frameName with the frame's tool-call id after a slash.
func withCallID(f *messages.Frame) string { return frameName(f) + "/" + f.GetToolCallId() }

// TestMux_RestartAnswersEachCallOfAStream: a duplex restarts (a sibling
// failed, under AllForOne) with two streaming calls open on m: each gets
// an ERROR and END with its tool-call id, in the order they came. An
// answer with no id would answer, to a caller that tells calls by id,
// every call it has on the stream, one it sent just after the restart
// (served by the next incarnation) among them. A call whose frames carry
// no id gets an ERROR and END with none, after the others'. Once the
// duplex is back, a new call on m is served, and its answer is its own.
func TestMux_RestartAnswersEachCallOfAStream(t *testing.T) {
	for _, tc := range []struct {
		ids  [2]string
		want []string
	}{
		{[2]string{"c3", "c4"}, []string{"ERROR(restarted)/c3", "END/c3", "ERROR(restarted)/c4", "END/c4"}},
		{[2]string{"", "c4"}, []string{"ERROR(restarted)/c4", "END/c4", "ERROR(restarted)/", "END/"}},
		{[2]string{"c3", ""}, []string{"ERROR(restarted)/c3", "END/c3", "ERROR(restarted)/", "END/"}},
	} {
		t.Run(tc.ids[0]+"+"+tc.ids[1], func(t *testing.T) {
			mb, open, restart, release := heldRestart(t)
			m := open("m")
			if err := m.SendAll(messages.StreamingToolCall("m", tc.ids[0], "tool"), messages.StreamingToolCall("m", tc.ids[1], "tool")); err != nil {
				t.Fatal(err)
			}
			waitDrained(mb) // the calls are open when the restart comes
			restart()
			waitDrained(mb)
			if got := queued(t, m, withCallID); !slices.Equal(got, tc.want) {
				t.Errorf("stream m got %q, want %q (each call's answer)", got, tc.want)
			}
			release()
			if err := m.Send(messages.ToolCall("m", "c5", "tool", nil)); err != nil {
				t.Fatal(err)
			}
			if got, want := recvCall(t, m), []string{`TOOL_RESULT("c5")/c5`, "END/c5"}; !slices.Equal(got, want) {
				t.Errorf("a new call on m after the restart got %q, want %q", got, want)
			}
		})
	}
}

// TestMux_RestartAnswersACallOfNoIDBesideAnEndedOne: a stream carries a
// call whose frames carry no id (a TEXT) and a call c4, which the Logic
// answers and ends with c4's id. The END of c4 ends c4 alone: the call
// of no id is still open, and the duplex's restart answers it with an
// ERROR and END of no id (without them its caller would wait forever).
func TestMux_RestartAnswersACallOfNoIDBesideAnEndedOne(t *testing.T) {
	mb, open, restart, release := heldRestart(t)
	m := open("m")
	if err := m.SendAll(messages.Text("m", "hi"), messages.ToolCall("m", "c4", "tool", nil)); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	restart()
	waitDrained(mb)
	want := []string{`TOOL_RESULT("c4")/c4`, "END/c4", "ERROR(restarted)/", "END/"}
	if got := queued(t, m, withCallID); !slices.Equal(got, want) {
		t.Errorf("stream m got %q, want %q (c4's answer, then the restart's of the call of no id)", got, want)
	}
	release()
}

// TestConn_StopAnswersEachCallOfAStream: a duplex stopped with two
// streaming calls open on s answers each with an ERROR and END of
// failure kind StoppedKind and its tool-call id, as a restart does.
func TestConn_StopAnswersEachCallOfAStream(t *testing.T) {
	rt := startRuntime(t)
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetType() == messages.FrameType_TEXT {
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if err := conn.SendAll(messages.StreamingToolCall("s", "c1", "tool"), messages.StreamingToolCall("s", "c2", "tool"),
		messages.Text("g", "probe")); err != nil {
		t.Fatal(err)
	}
	// The probe's END comes once the calls are open.
	if _, err := conn.RecvStream(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range closeAndDrain(t, conn) {
		got = append(got, withCallID(f)+"["+f.GetMeta().GetFailureKind()+"]")
	}
	stopped := "ERROR(" + ErrStopped.Error() + ")"
	want := []string{stopped + "/c1[stopped]", "END/c1[]", stopped + "/c2[stopped]", "END/c2[]"}
	if !slices.Equal(got, want) {
		t.Errorf("stream s got %q, want %q (each call's answer)", got, want)
	}
}

// recvCall reads s up to an END and returns what it read as withCallID
// names it.
func recvCall(t *testing.T, s *MuxStream) []string {
	t.Helper()
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1][:3] != "END" {
		f, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("stream %s: %v after %q", s.ID(), err, got)
		}
		got = append(got, withCallID(f))
	}
	return got
}
