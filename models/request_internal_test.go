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
