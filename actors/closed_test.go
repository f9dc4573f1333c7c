package actors

import (
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// TestClosedCalls_UpToEnd: every frame of a recorded stream is the
// closed call's, up to and including its caller's END, which takes the
// stream out of the record; once the record is empty, its map is freed
// (the hot path reads a nil map's length). Other streams' frames are not
// the record's.
func TestClosedCalls_UpToEnd(t *testing.T) {
	var c closedCalls
	c.add("s")
	c.add("") // no stream: nothing to record
	if c.late(messages.Text("other", "x")) {
		t.Error("a frame of a stream not recorded was taken as late")
	}
	for _, f := range []*messages.Frame{
		messages.Text("s", "x"), messages.ToolCall("s", "c", "t", nil), approval("s"),
		messages.Cancel("s", ""), messages.Describe("s"), messages.End("s"),
	} {
		if !c.late(f) {
			t.Errorf("%s before the caller's END was not taken as late", f.GetType())
		}
	}
	if c.len() != 0 || c.streams != nil {
		t.Errorf("after the caller's END the record holds %d streams (map %v)", c.len(), c.streams)
	}
	if c.late(messages.Text("s", "again")) {
		t.Error("a new call after the caller's END was taken as late")
	}
}

// TestClosedCalls_Bounded: the record holds at most closedMax streams,
// forgetting the oldest; a stream recorded again counts from then.
func TestClosedCalls_Bounded(t *testing.T) {
	var c closedCalls
	const extra = 3
	c.add("s0")
	for i := range closedMax + extra - 1 {
		c.add("s" + strconv.Itoa(i+1))
		if i == extra {
			c.add("s0") // recorded again: now newer than s1 to s(extra+1)
		}
		if c.len() > closedMax {
			t.Fatalf("after %d records the record holds %d streams, want at most %d", i+2, c.len(), closedMax)
		}
	}
	for i := range closedMax + extra {
		id := "s" + strconv.Itoa(i)
		want := i == 0 || i > extra // s1 to s(extra) forgotten
		if got := c.late(messages.Cancel(id, "")); got != want {
			t.Errorf("stream %s: recorded %v, want %v", id, got, want)
		}
	}
}
