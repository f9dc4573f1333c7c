package actors

import (
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/messages"
)

// callAnswerer is a Logic that answers each TOOL_CALL written into it,
// but those of tool "hold", with a result and the END of the call alone
// (its tool-call id), as a tool actor answers the calls of a model's
// response: it ends no stream itself.
var callAnswerer = LogicFunc(func(c Context, msg any) {
	f, ok := msg.(*messages.Frame)
	if !ok || f.GetType() != messages.FrameType_TOOL_CALL || f.IsToolArgChunk() || f.GetName() == "hold" {
		return
	}
	c.Emit(messages.RawToolResult(f.GetStreamId(), f.GetToolCallId(), f.GetName(), []byte(`1`)))
	c.Emit(endOf(f.GetStreamId(), f.GetToolCallId()))
})

// TestShell_QuietStreamsBounded: a caller that never ends its streams (a
// model that writes its text, of no tool-call id, beside its tool calls,
// and no END) leaves each stream open once the Logic has ended its calls,
// for the text beside them. A long-lived duplex keeps a bounded number of
// such streams, while every stream with a call still open is kept, however
// many: a stream with a call known by its id, and one whose only call is
// of no id (a model's prompt).
func TestShell_QuietStreamsBounded(t *testing.T) {
	s := &shell{logic: callAnswerer, subscriber: actor.NewPID("local", "sub"), ctx: &sentFrames{}}
	n := 4 * openQuiet
	for i := range n {
		q, h, p := "q"+strconv.Itoa(i), "h"+strconv.Itoa(i), "p"+strconv.Itoa(i)
		s.input(messages.Text(q, "thinking"))
		s.input(messages.ToolCall(q, "a", "tool", nil))
		s.input(messages.ToolCall(q, "b", "tool", nil))
		s.input(messages.ToolCall(h, "a", "hold", nil))
		s.input(messages.Text(p, "a prompt"))
	}
	for i := range n {
		h, p := "h"+strconv.Itoa(i), "p"+strconv.Itoa(i)
		if s.open.call(h) != "a" {
			t.Fatalf("stream %s, of a call still open, forgotten", h)
		}
		if !s.open.has(p) {
			t.Fatalf("stream %s, of a call of no id still open, forgotten", p)
		}
	}
	if quiet := s.open.len() - 2*n; quiet > openQuiet+openQuiet/4 {
		t.Errorf("%d streams kept whose calls the Logic ended, want at most %d", quiet, openQuiet+openQuiet/4)
	}
	// The latest quiet streams are kept: their text still opens no new stream.
	if last := "q" + strconv.Itoa(n-1); !s.open.has(last) {
		t.Errorf("the latest quiet stream %s forgotten", last)
	}
}

// BenchmarkOpenStreams_Frames measures the shell's bookkeeping of the
// frames of calls: each of three streams (one past the inline room)
// carries two calls, whose frames note them, and the Logic ends both.
func BenchmarkOpenStreams_Frames(b *testing.B) {
	var o openStreams
	ids := []string{"s0", "s1", "s2"}
	b.ReportAllocs()
	for b.Loop() {
		for _, id := range ids {
			o.add(id)
		}
		for _, id := range ids {
			for range 4 {
				o.noteCall(id, "c1")
				o.noteCall(id, "c2")
			}
		}
		for _, id := range ids {
			o.endCall(id, "c1")
			if !o.endCall(id, "c2") {
				o.remove(id)
			}
		}
	}
}

// BenchmarkOpenStreams_OneCallEnds measures what streams of one call
// each, by far the most, cost to open, note and close as the shell does
// for a call's frame and the Logic's END of it with its id.
func BenchmarkOpenStreams_OneCallEnds(b *testing.B) {
	var o openStreams
	ids := []string{"s0", "s1", "s2"}
	for b.Loop() {
		for _, id := range ids {
			o.add(id)
			o.noteCall(id, "c1")
		}
		for _, id := range ids {
			if !o.endCall(id, "c1") {
				o.remove(id)
			}
		}
	}
}

// TestOpenStreams_PastInlineNoAllocation: streams past the inline room,
// each of one call, opened and ended over and over, cost no allocation
// once the map has its room: counting them for the bound allocates
// nothing.
func TestOpenStreams_PastInlineNoAllocation(t *testing.T) {
	var o openStreams
	cycle := func() {
		for _, id := range []string{"s0", "s1", "s2", "s3"} {
			o.add(id)
			o.noteCall(id, "c")
		}
		for _, id := range []string{"s0", "s1", "s2", "s3"} {
			if !o.endCall(id, "c") {
				o.remove(id)
			}
		}
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Errorf("streams past the inline room cost %v allocations, want 0", n)
	}
}
