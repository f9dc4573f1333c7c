package actors

import (
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
	if !c.empty() {
		t.Errorf("once its stream was reused, the record still holds %d streams", len(c.calls))
	}
	if c.drop("other", messages.FrameType_TEXT) {
		t.Error("a stream never recorded was dropped")
	}
}
