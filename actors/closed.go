package actors

import "github.com/polyweave/polyweave-go/messages"

// closedCalls is a duplex's record of the calls its shell answered for
// good (ERROR and END) before their caller's input had ended: the calls
// open when an incarnation ended (those of a plain duplex: a persistent
// one recovers its calls) and the calls refused while the duplex
// restarted or stopped (see shell.refuse). It lives in the mailboxCell
// that all the duplex's incarnations share, so the frames of such a call
// that come after the answer (queued behind the failure, or still being
// sent) reach no incarnation: none answers the call a second time.
//
// A call's input is the frames its caller sends on the stream up to its
// END: the frame protocol has no other end of a request, and PARAM, TEXT
// (content, argument chunks), META (tool completion) and TOOL_CALL frames
// all follow one another within one. So every frame of a recorded stream
// is the closed call's, and dropped, up to and including its caller's
// END, which takes the stream out of the record; the caller's next call
// on the stream, which follows that END, is served. A call whose
// caller's END came before the answer is not recorded: what may follow
// it (an approval decision, a CANCEL) opens no call, and the next call on
// the stream is a new one. Nor is a call opened by a whole request (see
// wholeRequest), whose input is complete with its one frame.
//
// The record is empty but for the time between a restart and its closed
// calls' ENDs (queued behind the failure, most often): the shell's hot
// path reads its length, and looks further only when it is not empty. A
// caller that never sends the END of a call so closed (one it opened
// with more than a whole request) leaves its stream in the record, and
// its next call on that stream is dropped too; the record holds at most
// closedMax streams, forgetting the oldest (whose late frames are then
// taken as any stream's).
type closedCalls struct {
	streams map[string]uint64 // stream: when it was recorded
	seq     uint64            // of the last record
}

// closedMax is how many streams a duplex's record of closed calls holds
// at most (see closedCalls).
const closedMax = 1024

// len reports how many streams the record holds.
func (c *closedCalls) len() int { return len(c.streams) }

// add records stream, whose call the shell answered for good before its
// caller's END came.
func (c *closedCalls) add(stream string) {
	if stream == "" {
		return
	}
	if c.streams == nil {
		c.streams = make(map[string]uint64)
	}
	if _, ok := c.streams[stream]; !ok && len(c.streams) >= closedMax {
		c.forgetOldest()
	}
	c.seq++
	c.streams[stream] = c.seq
}

// late reports whether f is a late frame of a recorded call, to be
// dropped: every frame of a recorded stream is, and its caller's END
// takes the stream out of the record.
func (c *closedCalls) late(f *messages.Frame) bool {
	id := f.GetStreamId()
	if _, ok := c.streams[id]; !ok {
		return false
	}
	if f.GetType() == messages.FrameType_END {
		delete(c.streams, id)
		if len(c.streams) == 0 {
			c.streams = nil // the hot path finds it empty; free the map
		}
	}
	return true
}

// forgetOldest takes the stream recorded first out of the record.
func (c *closedCalls) forgetOldest() {
	oldest, at := "", c.seq+1
	for id, seq := range c.streams {
		if seq < at {
			oldest, at = id, seq
		}
	}
	delete(c.streams, oldest)
}

// wholeRequest reports whether f is a whole request: a DESCRIBE, or a
// TOOL_CALL whose arguments it carries (not a streaming one). The frame
// protocol's tool duplex answers each with its DESCRIPTION or TOOL_RESULT
// and END, its caller sending nothing more of it (no END), so the input
// of the call it opens is complete with it.
func wholeRequest(f *messages.Frame) bool {
	switch f.GetType() {
	case messages.FrameType_DESCRIBE:
		return true
	case messages.FrameType_TOOL_CALL:
		return !f.GetMeta().GetStreaming()
	}
	return false
}
