package actors

import (
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestClosedStreams_CallAndNext: the frames of a recorded call are
// dropped up to its caller's END; after it, a META and frames that open
// nothing still are, and a frame that opens the stream is a new call,
// which takes it out of the record.
func TestClosedStreams_CallAndNext(t *testing.T) {
	var c closedStreams
	c.add("s", false)
	steps := []struct {
		t    messages.FrameType
		drop bool
	}{
		{messages.FrameType_TEXT, true},
		{messages.FrameType_CANCEL, true},
		{messages.FrameType_END, true}, // the call's end
		{messages.FrameType_META, true},
		{messages.FrameType_TOOL_RESULT, true},
		{messages.FrameType_END, true},
		{messages.FrameType_PARAM, false}, // a new call
		{messages.FrameType_END, false},
		{messages.FrameType_META, false},
	}
	for i, step := range steps {
		if got := c.drop("s", step.t); got != step.drop {
			t.Errorf("frame %d (%s): dropped %v, want %v", i, step.t, got, step.drop)
		}
	}
	if !c.empty() || c.order != nil {
		t.Errorf("once its stream was reused, the record still holds %d streams, %d entries", len(c.calls), len(c.order))
	}
	if c.drop("other", messages.FrameType_TEXT) {
		t.Error("a stream never recorded was dropped")
	}
}

// TestClosedStreams_Bounded: the record holds the last closedMax streams
// recorded and no more entries than that, however many are recorded; the
// oldest are forgotten (their frames are no longer dropped). A stream
// recorded again after it left the record is kept for closedMax records
// from then, though its earlier entry is still in the ring.
func TestClosedStreams_Bounded(t *testing.T) {
	var c closedStreams
	const extra = 10
	for i := range closedMax + extra {
		c.add("s"+strconv.Itoa(i), false)
		if len(c.calls) > closedMax || len(c.order) > closedMax {
			t.Fatalf("after %d records: %d streams, %d entries; want at most %d", i+1, len(c.calls), len(c.order), closedMax)
		}
	}
	for i := range closedMax + extra {
		want := i >= extra
		if got := c.drop("s"+strconv.Itoa(i), messages.FrameType_TEXT); got != want {
			t.Fatalf("stream %d of %d recorded: dropped %v, want %v", i, closedMax+extra, got, want)
		}
	}

	c.reset()
	c.add("k", false) // keeps the record from emptying (which frees the ring)
	c.add("x", true)
	if c.drop("x", messages.FrameType_TEXT) { // a new call: x leaves the record
		t.Fatal("a new call on x was dropped")
	}
	c.add("x", false) // the ring: k, x's stale entry, x
	for i := range closedMax - 1 {
		c.add("s"+strconv.Itoa(i), false)
	}
	// k and x's stale entry have gone from the ring.
	if !c.drop("x", messages.FrameType_CANCEL) {
		t.Fatal("x, recorded again closedMax-1 records ago, was forgotten with its stale entry")
	}
	if c.drop("k", messages.FrameType_CANCEL) {
		t.Error("k, the oldest record, is still recorded")
	}
	c.add("y", false)
	if c.drop("x", messages.FrameType_CANCEL) {
		t.Error("x, recorded closedMax records ago, is still recorded")
	}
}
