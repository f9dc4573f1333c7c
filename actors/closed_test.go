package actors

import (
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestClosedCalls_BoundForgetsOldest checks that the record of calls
// answered by earlier incarnations keeps closedMax streams at most,
// forgetting the oldest first, and that the streams whose record ended
// (their caller's END came) neither count nor push a live one out.
func TestClosedCalls_BoundForgetsOldest(t *testing.T) {
	var open openStreams
	c := &closedCalls{}
	id := func(i int) string { return "s" + strconv.Itoa(i) }
	for i := range closedMax {
		c.add(id(i), "", false)
	}
	// The END of s0 ends its record: its entry is stale.
	if !c.drop(messages.End(id(0)), &open) {
		t.Fatal("the END of a recorded call was not dropped")
	}
	for i := closedMax; i < closedMax+10; i++ {
		c.add(id(i), "", false)
	}
	if c.len() != closedMax {
		t.Fatalf("%d streams recorded, want %d", c.len(), closedMax)
	}
	// s0 was gone already; s1 to s9 are the oldest.
	for i := range closedMax + 10 {
		_, kept := c.m[id(i)]
		if want := i >= 10; kept != want {
			t.Errorf("stream %s recorded %v, want %v", id(i), kept, want)
		}
	}
	// Ended records and stale entries: the order list keeps no more
	// than twice the bound.
	for i := range 4 * closedMax {
		c.drop(messages.End(id(10+i%closedMax)), &open)
		c.add(id(10+i%closedMax), "", false)
	}
	if len(c.order) > 2*closedMax {
		t.Errorf("%d entries in the order list for %d streams", len(c.order), c.len())
	}
}

// TestClosedCalls_WhatIsDropped checks which frames of a recorded
// stream are dropped: those that open no call (but a META) while the
// incarnation has no call of its own open on it; a frame that opens a
// call ends the record and goes through, as the caller's END does after
// it is dropped.
func TestClosedCalls_WhatIsDropped(t *testing.T) {
	result, err := messages.ToolResult("s", "c", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	var open openStreams
	c := &closedCalls{}
	c.add("s", "", false)
	for _, f := range []*messages.Frame{messages.Cancel("s", ""), messages.Abort("s"), messages.Tick("s"), result} {
		if !c.drop(f, &open) {
			t.Errorf("a late %s of the answered call went through", f.GetType())
		}
	}
	if c.drop(messages.Meta("s", "approval", nil), &open) {
		t.Error("a META on the stream was dropped")
	}
	if c.drop(messages.Text("o", "x"), &open) || c.drop(messages.End("o"), &open) {
		t.Error("a frame of a stream not recorded was dropped")
	}
	open.add("s")
	if c.drop(messages.Cancel("s", ""), &open) {
		t.Error("a CANCEL of a call the incarnation has open on the stream was dropped")
	}
	open.remove("s")
	if c.drop(messages.Text("s", "new"), &open) {
		t.Error("a frame that opens a new call was dropped")
	}
	if c.drop(messages.End("s"), &open) {
		t.Error("the END of the new call was dropped")
	}
	c.add("s", "", false)
	if !c.drop(messages.End("s"), &open) || c.drop(messages.End("s"), &open) {
		t.Error("want the first END after the answer dropped, and the next one through")
	}
}

// TestClosedCalls_ToldByToolCallID checks that of the frames that open
// a call on a recorded stream, those with the answered call's tool-call
// id but a TOOL_CALL (its argument chunks still in flight) are dropped
// and keep the record, and that a TOOL_CALL, a frame with another id
// and one with none each go through, a new call: the answered call sent
// again ends the record, and another leaves it served, the answered
// call's rest that its caller sent before it still dropped.
func TestClosedCalls_ToldByToolCallID(t *testing.T) {
	var open openStreams
	c := &closedCalls{}
	c.add("s", "c1", false)
	for range 2 {
		if !c.drop(messages.ToolArgChunk("s", "c1", "{"), &open) {
			t.Fatal("a chunk of the answered call went through")
		}
	}
	rest := messages.RawParam("s", "p", []byte("1"))
	rest.ToolCallId = "c1"
	for _, f := range []*messages.Frame{
		messages.ToolCall("s", "c2", "t", nil),   // another call
		messages.ToolCall("s", "c1", "t", nil),   // the answered call sent again
		messages.Text("s", "hi"),                 // no id: taken for a new call
		messages.RawParam("s", "p", []byte("1")), // the same
	} {
		c.add("s", "c1", false)
		if c.drop(f, &open) {
			t.Errorf("%s (tool-call id %q) on the stream of the answered c1 was dropped", f.GetType(), f.GetToolCallId())
		}
		again := f.GetToolCallId() == "c1"
		if rec, ok := c.m["s"]; ok != !again || ok && !rec.v.served {
			t.Errorf("%s (tool-call id %q): record of the stream %+v kept %v, want it kept served %v", f.GetType(), f.GetToolCallId(), rec.v, ok, !again)
		}
		if dropped := c.drop(rest, &open); dropped == again {
			t.Errorf("after %s (tool-call id %q), c1's PARAM dropped %v, want %v", f.GetType(), f.GetToolCallId(), dropped, !again)
		}
		c.remove("s")
	}
}

// TestShell_DropAnswered checks which frames on the stream of a call the
// incarnation answered are its rest, dropped: all but a frame that opens
// a new call (told by its tool-call id, or a TOOL_CALL), up to the
// caller's END; a frame without an id is the call's rest. A new call
// other than the answered one sent again leaves the record served (see
// TestShell_DropAnsweredServed).
func TestShell_DropAnswered(t *testing.T) {
	for _, tc := range []struct {
		answered string // the answered call's tool-call id
		f        *messages.Frame
		drop     bool // f is the call's rest, dropped
		keep     bool // the record stays
	}{
		{"c1", messages.ToolArgChunk("s", "c1", "{"), true, true},
		{"c1", messages.Cancel("s", "c1"), true, true},
		{"c1", messages.Cancel("s", "c2"), true, true},
		{"c1", messages.ToolComplete("s", "c1"), true, true},
		{"c1", messages.Meta("s", "approval", nil), true, true},
		{"c1", messages.Text("s", "more"), true, true},
		{"", messages.Text("s", "more"), true, true},
		{"", messages.Describe("s"), false, false}, // a whole call in one frame: a new one
		{"c1", messages.End("s"), true, false},
		{"c1", messages.ToolCall("s", "c2", "t", nil), false, true}, // served: c1's rest still dropped
		{"c1", messages.ToolCall("s", "c1", "t", nil), false, false},
		{"c1", messages.StreamingToolCall("s", "c2", "t"), false, true},
		{"c1", messages.ToolArgChunk("s", "c2", "{"), true, true}, // of a call interleaved with c1
		{"", messages.ToolCall("s", "c2", "t", nil), false, false},
		{"c1", messages.Text("o", "other stream"), false, false},
	} {
		s := &shell{}
		s.noteAnswered("s", tc.answered, false)
		if got := s.dropAnswered(tc.f); got != tc.drop {
			t.Errorf("answered %q, %s (id %q) on %s: dropped %v, want %v", tc.answered, tc.f.GetType(), tc.f.GetToolCallId(), tc.f.GetStreamId(), got, tc.drop)
		}
		if _, kept := s.answered.get("s"); kept != tc.keep && tc.f.GetStreamId() == "s" {
			t.Errorf("answered %q, %s (id %q): record kept %v, want %v", tc.answered, tc.f.GetType(), tc.f.GetToolCallId(), kept, tc.keep)
		}
	}
}

// TestClosedCalls_InterleavedChunkIsTheAnsweredCalls checks that an
// argument chunk of a call other than the last one noted on a recorded
// stream (two streaming calls interleaved on it) is dropped as the
// answered call's rest: a chunk opens no call of its own (its call's
// TOOL_CALL comes first, and would have ended the record), while a
// TOOL_CALL still ends the record and goes through.
func TestClosedCalls_InterleavedChunkIsTheAnsweredCalls(t *testing.T) {
	var open openStreams
	c := &closedCalls{}
	c.add("s", "c2", false)
	if !c.drop(messages.ToolArgChunk("s", "c1", `{"a":`), &open) {
		t.Error("a chunk of a call interleaved with the answered one went through")
	}
	if c.drop(messages.StreamingToolCall("s", "c3", "t"), &open) {
		t.Error("a new streaming TOOL_CALL was dropped")
	}
	if c.drop(messages.ToolArgChunk("s", "c3", `{}`), &open) {
		t.Error("a chunk of the new call was dropped")
	}
}

// TestShell_DropAnsweredShared checks which frames on the stream of a
// call a Resume answered alone, the other calls of its stream going on,
// are its rest, dropped: those that carry its id, but its TOOL_CALL sent
// again; the caller's END of the stream is delivered, and ends the
// record.
func TestShell_DropAnsweredShared(t *testing.T) {
	for _, tc := range []struct {
		f    *messages.Frame
		drop bool // f is the call's rest, dropped
		keep bool // the record stays
	}{
		{messages.ToolArgChunk("s", "c1", "{"), true, true},
		{messages.ToolComplete("s", "c1"), true, true},
		{messages.Cancel("s", "c1"), true, true},
		{messages.ToolArgChunk("s", "c2", "{"), false, true}, // another call's
		{messages.ToolComplete("s", "c2"), false, true},
		{messages.Cancel("s", "c2"), false, true},
		{messages.Cancel("s", ""), false, true},
		{messages.Text("s", "more"), false, true},
		{messages.ToolCall("s", "c3", "t", nil), false, true},
		{messages.ToolCall("s", "c1", "t", nil), false, false}, // c1 sent again
		{messages.End("s"), false, false},
	} {
		s := &shell{}
		s.noteAnswered("s", "c1", true)
		if got := s.dropAnswered(tc.f); got != tc.drop {
			t.Errorf("%s (id %q): dropped %v, want %v", tc.f.GetType(), tc.f.GetToolCallId(), got, tc.drop)
		}
		if _, kept := s.answered.get("s"); kept != tc.keep {
			t.Errorf("%s (id %q): record kept %v, want %v", tc.f.GetType(), tc.f.GetToolCallId(), kept, tc.keep)
		}
	}
}

// TestShell_DropAnsweredServed checks which frames on the stream of an
// answered call c1 (beside c0, answered with it) are their rest once a
// new call c2 was served there: those that carry c1's or c0's id, but
// a TOOL_CALL (that call sent again, which ends the record) or a
// DESCRIBE; the frames of no id or of another id are the new call's or
// later ones', delivered; the caller's END is delivered, and ends the
// record. What the Logic emits with c1's or c0's id is dropped, what it
// emits for the new call goes out.
func TestShell_DropAnsweredServed(t *testing.T) {
	param := func(call string) *messages.Frame {
		f := messages.RawParam("s", "p", []byte("1"))
		f.ToolCallId = call
		return f
	}
	for _, tc := range []struct {
		f    *messages.Frame
		drop bool // f is the rest of c1 or c0, dropped
		keep bool // the record stays
	}{
		{param("c1"), true, true},
		{param("c0"), true, true},
		{messages.ToolArgChunk("s", "c1", "{"), true, true},
		{messages.ToolComplete("s", "c0"), true, true},
		{messages.Cancel("s", "c1"), true, true},
		{param("c2"), false, true},
		{param(""), false, true},
		{messages.Text("s", "more"), false, true},
		{messages.ToolArgChunk("s", "c2", "{"), false, true},
		{messages.Cancel("s", ""), false, true},
		{messages.ToolCall("s", "c3", "t", nil), false, true},
		{&messages.Frame{Type: messages.FrameType_DESCRIBE, StreamId: "s", ToolCallId: "c1"}, false, true},
		{messages.ToolCall("s", "c1", "t", nil), false, false}, // c1 sent again
		{messages.End("s"), false, false},
	} {
		s := &shell{}
		s.answered = &closedCalls{}
		s.answered.addRecord("s", closedCall{call: "c1", others: []string{"c0"}})
		if s.dropAnswered(messages.ToolCall("s", "c2", "t", nil)) {
			t.Fatal("the new call c2 was dropped")
		}
		if got := s.dropAnswered(tc.f); got != tc.drop {
			t.Errorf("%s (id %q): dropped %v, want %v", tc.f.GetType(), tc.f.GetToolCallId(), got, tc.drop)
		}
		if _, kept := s.answered.get("s"); kept != tc.keep {
			t.Errorf("%s (id %q): record kept %v, want %v", tc.f.GetType(), tc.f.GetToolCallId(), kept, tc.keep)
		}
	}
	s := &shell{}
	s.answered = &closedCalls{}
	s.answered.addRecord("s", closedCall{call: "c1", others: []string{"c0"}})
	s.dropAnswered(messages.ToolCall("s", "c2", "t", nil))
	for call, drop := range map[string]bool{"c1": true, "c0": true, "c2": false, "": false} {
		if got := s.dropEmit(messages.RawToolResult("s", call, "t", []byte("1"))); got != drop {
			t.Errorf("the Logic's result with id %q: dropped %v, want %v", call, got, drop)
		}
	}
}
