package models

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// A stream cancelled between its PARAMs and an END that never comes (a
// client abandoning its request for good) must not be remembered forever:
// a long-running adapter serving many such streams keeps a bounded number
// of them, the latest, whose late END is still ignored.
func TestTracker_AbandonedRequestsAreNotKeptForever(t *testing.T) {
	var tr Tracker
	discard := func(*messages.Frame) {}
	const streams = 10 * maxCutShort
	for i := range streams {
		id := "s" + strconv.Itoa(i)
		tr.Frame(messages.RawParam(id, ParamMessages, json.RawMessage(`[]`)), discard)
		if i%2 == 0 {
			tr.Frame(messages.Cancel(id, ""), discard)
		} else {
			tr.Frame(messages.Abort(id), discard)
		}
	}
	if tr.Open() != 0 {
		t.Fatalf("%d streams open after every one was cancelled", tr.Open())
	}
	if n := len(tr.cutShort); n > maxCutShort {
		t.Fatalf("the tracker remembers %d abandoned streams after %d, want at most %d", n, streams, maxCutShort)
	}
	// The latest cancelled stream's late END still answers nothing.
	var out []*messages.Frame
	last := "s" + strconv.Itoa(streams-1)
	if req := tr.Frame(messages.End(last), func(f *messages.Frame) { out = append(out, f) }); req != nil || len(out) != 0 {
		t.Fatalf("the late END of the latest cancelled stream started %v, emitted %d frames", req, len(out))
	}
	for _, id := range tr.cutShort {
		if id == last {
			t.Fatalf("stream %s is still remembered after its late END", last)
		}
	}
}
