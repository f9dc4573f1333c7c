package actors

import (
	"slices"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestConn_SecondEndOfACallNotPassedOn: a stream carries calls b and a;
// the Logic answers a, ends it twice, then answers b. A consumer that
// reads the stream's calls one RecvStream each (every call ends with an
// END of its id) gets a's answer, then b's: the Logic's second END of a,
// while the stream is open for b, is dropped, not passed on to end the
// consumer's read of b before b's result. A stop then answers nothing
// more on the stream.
func TestConn_SecondEndOfACallNotPassedOn(t *testing.T) {
	rt := startRuntime(t)
	var held []string
	conn, err := rt.Start(frameDuplex(func(c Context, f *messages.Frame) {
		if f.GetType() != messages.FrameType_TOOL_CALL {
			return
		}
		id, call := f.GetStreamId(), f.GetToolCallId()
		if f.GetName() == "hold" {
			held = append(held, call)
			return
		}
		c.Emit(messages.RawToolResult(id, call, f.GetName(), []byte(`1`)))
		c.Emit(endOf(id, call))
		c.Emit(endOf(id, call))
		for _, h := range held {
			c.Emit(messages.RawToolResult(id, h, "hold", []byte(`2`)))
			c.Emit(endOf(id, h))
		}
		held = nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.StreamingToolCall("s", "b", "hold"), messages.ToolCall("s", "a", "twice", nil)); err != nil {
		t.Fatal(err)
	}
	got := [][]string{readCall(t, conn), readCall(t, conn)}
	checkCallReads(t, conn, got, [][]string{{"TOOL_RESULT(1)/a", "END/a"}, {"TOOL_RESULT(2)/b", "END/b"}})
}

// readCall reads stream s of conn up to its next END (Conn.RecvStream),
// as a consumer reading it call by call does, and returns the frames
// read as withCallID records them.
func readCall(t *testing.T, conn *Conn) []string {
	t.Helper()
	frames, err := conn.RecvStream(testContext(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	for _, f := range frames {
		read = append(read, withCallID(f))
	}
	return read
}

// checkCallReads checks the reads of stream s, got, against want, then
// stops conn's duplex, which must emit nothing more.
func checkCallReads(t *testing.T, conn *Conn, got, want [][]string) {
	t.Helper()
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("reads of stream s call by call got %q, want %q", got, want)
	}
	for _, f := range closeAndDrain(t, conn) {
		t.Errorf("after the calls' answers, stream %s got %s", f.GetStreamId(), withCallID(f))
	}
}

// TestConn_SecondEndOfAClosedCallNotPassedOn: the Logic ends call a, the
// one call of stream s, twice. Its first END closes s; the second, on s
// closed, is dropped, not passed on: a consumer that reads s call by
// call (Conn.RecvStream) and then sends call b on it would take it for
// b's END and stop before b's result.
func TestConn_SecondEndOfAClosedCallNotPassedOn(t *testing.T) {
	rt := startRuntime(t)
	conn, err := rt.Start(twiceEndingDuplex())
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, call := range []*messages.Frame{messages.ToolCall("s", "a", "twice", nil), messages.ToolCall("s", "b", "plain", nil)} {
		if err := conn.Send(call); err != nil {
			t.Fatal(err)
		}
		got = append(got, readCall(t, conn))
	}
	checkCallReads(t, conn, got, [][]string{{"TOOL_RESULT(1)/a", "END/a"}, {"TOOL_RESULT(1)/b", "END/b"}})
}

// TestConn_SecondEndOfAClosedCallAfterANewCall: the Logic's END of call
// a closed stream s, its one call; the caller then opens call b on s,
// and the Logic ends a again. That END ends nothing and is dropped (b's
// consumer would take it for b's END); the stop answers b and the call
// of no id beside it, once each. A new call a (its id used again)
// opening s instead gets its END: the stop answers the call of no id
// alone.
func TestConn_SecondEndOfAClosedCallAfterANewCall(t *testing.T) {
	for _, tc := range []struct {
		next string // the call that opens s again
		want []string
	}{
		{"b", append(append([]string{"END/a[]"}, stoppedPair("b")...), stoppedPair("")...)},
		{"a", append([]string{"END/a[]", "END/a[]"}, stoppedPair("")...)},
	} {
		got := stopAnswers(t, messages.ToolCall("s", "a", "plain", nil),
			messages.ToolCall("s", tc.next, "hold", nil), messages.Text("s", "again a"))
		if !slices.Equal(got, tc.want) {
			t.Errorf("call %s after a: stream s got %q, want %q", tc.next, got, tc.want)
		}
	}
}

// TestOpenStreams_SecondEndOfAClosingCall: the END of c1, the one call of
// a stream, closes it; a second END of c1 is told (secondEnd) while the
// stream is closed or held by another call, not once c1 opens it again,
// nor an END of another call; past closedByMax streams closed since, it
// is no longer told. Inline, and past the inline room.
func TestOpenStreams_SecondEndOfAClosingCall(t *testing.T) {
	for _, id := range []string{"s", "m"} {
		var o openStreams
		if id == "m" {
			o.openCalls("x0")
			o.openCalls("x1")
		}
		end := func(id, call string) {
			if o.endCall(id, call) {
				t.Fatalf("stream %s: the END of its one call %s left it open", id, call)
			}
			if o.remove(id) {
				o.closing(id, call)
			}
		}
		o.openCalls(id, "c1")
		end(id, "c1")
		if !o.secondEnd(id, "c1") || o.secondEnd(id, "c2") {
			t.Errorf("stream %s closed by c1: second END of c1 told %v, END of c2 told %v", id, o.secondEnd(id, "c1"), o.secondEnd(id, "c2"))
		}
		o.openCalls(id, "b")
		if !o.secondEnd(id, "c1") || o.secondEnd(id, "b") {
			t.Errorf("stream %s opened again by b: second END of c1 told %v, END of b told %v", id, o.secondEnd(id, "c1"), o.secondEnd(id, "b"))
		}
		o.remove(id)
		o.openCalls(id, "c1")
		if o.secondEnd(id, "c1") {
			t.Errorf("stream %s opened again by c1: its END told for a second one", id)
		}
		end(id, "c1")
		for i := range closedByMax {
			o.openCalls("o"+strconv.Itoa(i), "c")
			end("o"+strconv.Itoa(i), "c")
		}
		if o.secondEnd(id, "c1") {
			t.Errorf("stream %s: a second END of c1 told past %d streams closed since", id, closedByMax)
		}
	}
}
