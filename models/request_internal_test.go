package models

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// cancelBeforeEnd sends a PARAM of stream id and cancels it before its
// END, as a client abandoning its request does.
func cancelBeforeEnd(tr *Tracker, id string, abort bool) {
	discard := func(*messages.Frame) {}
	tr.Frame(messages.RawParam(id, ParamMessages, json.RawMessage(`[]`)), discard)
	if abort {
		tr.Frame(messages.Abort(id), discard)
	} else {
		tr.Frame(messages.Cancel(id, ""), discard)
	}
}

// lateEnd sends the END of stream id and reports what it made: a request
// started, or frames emitted.
func lateEnd(tr *Tracker, id string) (*Request, int) {
	var n int
	req := tr.Frame(messages.End(id), func(*messages.Frame) { n++ })
	return req, n
}

// A stream cancelled between its PARAMs and an END that never comes (a
// client abandoning its request for good) must not be remembered forever:
// a long-running adapter serving many such streams keeps a bounded number
// of them, the latest, whose late END is still ignored.
func TestTracker_AbandonedRequestsAreNotKeptForever(t *testing.T) {
	var tr Tracker
	const streams = 3 * maxCutShort
	for i := range streams {
		cancelBeforeEnd(&tr, "s"+strconv.Itoa(i), i%2 == 1)
	}
	if tr.Open() != 0 {
		t.Fatalf("%d streams open after every one was cancelled", tr.Open())
	}
	if n, m := len(tr.cut.at), len(tr.cut.ring); n > maxCutShort || m > maxCutShort {
		t.Fatalf("the tracker remembers %d abandoned streams (%d in its ring) after %d, want at most %d", n, m, streams, maxCutShort)
	}
	// The latest cancelled stream's late END still answers nothing.
	last := "s" + strconv.Itoa(streams-1)
	if req, n := lateEnd(&tr, last); req != nil || n != 0 {
		t.Fatalf("the late END of the latest cancelled stream started %v, emitted %d frames", req, n)
	}
	if _, ok := tr.cut.at[last]; ok {
		t.Fatalf("stream %s is still remembered after its late END", last)
	}
}

// The late END of a request cancelled before its END is ignored even
// when a burst of a thousand other streams was cancelled so in between:
// answering it would put an ERROR and END on the stream that the next
// request on the same id would read as its own answer.
func TestTracker_LateEndAfterABurstOfCancelsIsIgnored(t *testing.T) {
	var tr Tracker
	cancelBeforeEnd(&tr, "first", false)
	for i := range 1000 {
		cancelBeforeEnd(&tr, "other"+strconv.Itoa(i), true)
	}
	if req, n := lateEnd(&tr, "first"); req != nil || n != 0 {
		t.Fatalf("the late END of the first cancelled stream started %v and emitted %d frames: an answer the next request on the stream would read as its own", req, n)
	}
	// Once every late END has come, nothing of them is kept.
	for i := range 1000 {
		lateEnd(&tr, "other"+strconv.Itoa(i))
	}
	if len(tr.cut.at) != 0 || len(tr.cut.ring) != 0 {
		t.Fatalf("after every late END the tracker keeps %d streams and %d memories, want none", len(tr.cut.at), len(tr.cut.ring))
	}
}

// A stream id cancelled before its END, then used again and cancelled
// so again, is remembered by its latest cancel: the oldest memories
// going make it forget the first one, not the second.
func TestTracker_ReusedStreamIsRememberedByItsLatestCancel(t *testing.T) {
	var tr Tracker
	cancelBeforeEnd(&tr, "s", false)
	for i := range maxCutShort / 2 {
		cancelBeforeEnd(&tr, "a"+strconv.Itoa(i), false)
	}
	cancelBeforeEnd(&tr, "s", true) // a new request (its PARAM ends the first's memory), abandoned too
	for i := range maxCutShort - 2 {
		cancelBeforeEnd(&tr, "b"+strconv.Itoa(i), false) // the first cancel of s is now the oldest gone
	}
	if req, n := lateEnd(&tr, "s"); req != nil || n != 0 {
		t.Fatalf("the late END of the second cancelled request of s started %v and emitted %d frames", req, n)
	}
	if req, _ := lateEnd(&tr, "s"); req == nil {
		t.Fatal("an END after the late one was swallowed: it is a request")
	}
}

// The bound is 4096 cancels exactly: a stream is remembered through
// 4095 later cancels of other streams, and forgotten at the next one.
func TestTracker_CancelledStreamIsRememberedThrough4096Cancels(t *testing.T) {
	for _, c := range []struct {
		others     int
		remembered bool
	}{{maxCutShort - 1, true}, {maxCutShort, false}} {
		var tr Tracker
		cancelBeforeEnd(&tr, "first", false)
		for i := range c.others {
			cancelBeforeEnd(&tr, "other"+strconv.Itoa(i), false)
		}
		if n := len(tr.cut.at); n != min(c.others+1, maxCutShort) {
			t.Fatalf("after %d cancels the tracker remembers %d streams, want %d", c.others+1, n, min(c.others+1, maxCutShort))
		}
		req, n := lateEnd(&tr, "first")
		if ignored := req == nil && n == 0; ignored != c.remembered {
			t.Fatalf("after %d other cancels, the late END of the first started %v and emitted %d frames; want it ignored: %v",
				c.others, req, n, c.remembered)
		}
	}
}

// Once the ring has wrapped, the late ENDs of the streams it still
// remembers empty it all the same.
func TestTracker_WrappedMemoriesGoWithTheirLateEnds(t *testing.T) {
	var tr Tracker
	const streams = 2*maxCutShort + 7
	for i := range streams {
		cancelBeforeEnd(&tr, "s"+strconv.Itoa(i), false)
	}
	for i := streams - maxCutShort; i < streams; i++ {
		if req, n := lateEnd(&tr, "s"+strconv.Itoa(i)); req != nil || n != 0 {
			t.Fatalf("the late END of remembered stream s%d started %v and emitted %d frames", i, req, n)
		}
	}
	if len(tr.cut.at) != 0 || len(tr.cut.ring) != 0 || tr.cut.next != 0 {
		t.Fatalf("after every remembered late END the tracker keeps %d streams, %d memories (next %d), want none",
			len(tr.cut.at), len(tr.cut.ring), tr.cut.next)
	}
	// Remembering starts over from an empty ring.
	cancelBeforeEnd(&tr, "again", false)
	if req, n := lateEnd(&tr, "again"); req != nil || n != 0 {
		t.Fatalf("the late END of a stream cancelled after the ring emptied started %v and emitted %d frames", req, n)
	}
}
