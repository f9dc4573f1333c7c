package actors

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_RestOfAnAnsweredCallAfterARefusedOne: a duplex restarts while
// its child stops (a sibling failed, under AllForOne); its streaming
// call c1 on s, open at the restart, gets ERROR and END. The caller,
// which had not read that answer, sends a TOOL_CALL c2 on s, refused
// (a new call), and then a PARAM of c1, c1's rest sent before its
// answer, that comes while the duplex restarts or once it is back. It
// is dropped: the refusal of c2 does not make c1's frames a new call,
// refused or served, which would answer c1 a second time (at the
// refusal, or at the stop of the incarnation that took the PARAM for an
// open call). A TOOL_CALL c3 after it is served.
func TestMux_RestOfAnAnsweredCallAfterARefusedOne(t *testing.T) {
	for _, back := range []bool{false, true} {
		name := "while restarting"
		if back {
			name = "once back"
		}
		t.Run(name, func(t *testing.T) { testRestOfAnAnsweredCallAfterARefusedOne(t, back) })
	}
}

// testRestOfAnAnsweredCallAfterARefusedOne is
// TestMux_RestOfAnAnsweredCallAfterARefusedOne, c1's PARAM coming once
// the duplex is back when back.
func testRestOfAnAnsweredCallAfterARefusedOne(t *testing.T, back bool) {
	mux, mb, open, restart, release := heldRestartMux(t)
	s := open("s")
	param := messages.RawParam("s", "x", []byte(`1`))
	param.ToolCallId = "c1"
	if err := s.Send(messages.StreamingToolCall("s", "c1", "tool")); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb) // c1 is open when the restart comes
	restart()       // d's first incarnation has ended: d restarts, its child holding

	late := []*messages.Frame{messages.ToolCall("s", "c2", "tool", nil), param}
	if back {
		late = late[:1]
	}
	if err := s.SendAll(late...); err != nil {
		t.Fatal(err)
	}
	waitDrained(mb)
	want := []string{"ERROR(restarted)/c1", "END/c1", "ERROR(" + restartingText + ")/c2", "END/c2"}
	if got := queued(t, s, withCallID); !slices.Equal(got, want) {
		t.Errorf("while d restarts, stream s got %q, want %q (c1's PARAM dropped)", got, want)
	}

	release() // the new incarnation has started
	late = []*messages.Frame{messages.ToolCall("s", "c3", "tool", nil)}
	if back {
		late = append([]*messages.Frame{param}, late...)
	}
	if err := s.SendAll(late...); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []string
	for closed := false; ; {
		f, err := s.Recv(ctx)
		if errors.Is(err, ErrDuplexStopped) {
			break
		}
		if err != nil {
			t.Fatalf("stream s: %v after %q", err, got)
		}
		got = append(got, withCallID(f))
		if !closed && got[len(got)-1] == "END/c3" {
			// c3 is answered, every frame before it taken: stop d.
			if err := mux.Close(ctx); err != nil {
				t.Fatal(err)
			}
			closed = true
		}
	}
	if want := []string{`TOOL_RESULT("c3")/c3`, "END/c3"}; !slices.Equal(got, want) {
		t.Errorf("once d is back and then stopped, stream s got %q, want %q (c1's PARAM dropped)", got, want)
	}
}

// TestClosedCall_CarriedBounded: a stream on which call after call is
// refused, its caller sending no END, keeps a bounded record: each
// refused call's record keeps the carriedMax calls answered last before
// it, not every one answered on the stream.
func TestClosedCall_CarriedBounded(t *testing.T) {
	var rec closedCall
	const calls = 3 * carriedMax
	for i := range calls {
		c := "c" + strconv.Itoa(i)
		rec = closedCall{call: answeredCall(c), others: rec.carried(nil, c)}
	}
	if len(rec.others) != carriedMax {
		t.Fatalf("the last record keeps %d other calls, want %d", len(rec.others), carriedMax)
	}
	for i := calls - 2 - carriedMax; i < calls-1; i++ {
		c := "c" + strconv.Itoa(i)
		if kept := slices.Contains(rec.others, c); kept != (i >= calls-1-carriedMax) {
			t.Errorf("call %s kept: %v", c, kept)
		}
	}
}
