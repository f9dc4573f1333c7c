package actors

import (
	"slices"
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
	ctx := testContext(t)
	if err := conn.SendAll(messages.StreamingToolCall("s", "b", "hold"), messages.ToolCall("s", "a", "twice", nil)); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for range 2 {
		frames, err := conn.RecvStream(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		var read []string
		for _, f := range frames {
			read = append(read, withCallID(f))
		}
		got = append(got, read)
	}
	want := [][]string{{"TOOL_RESULT(1)/a", "END/a"}, {"TOOL_RESULT(2)/b", "END/b"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("two reads of stream s got %q, want %q", got, want)
	}
	for _, f := range closeAndDrain(t, conn) {
		t.Errorf("after both calls' answers, stream %s got %s", f.GetStreamId(), withCallID(f))
	}
}
