package actors

import "github.com/polyweave/polyweave-go/messages"

// closedStreams is a duplex's record of the calls its shell answered for
// good, with ERROR and END, when an incarnation ended (the streams still
// open then), and of the calls it refused after that (see shell.refuse).
// The frames its callers send on those streams after the answer are
// late frames of an answered call, and get nothing more: not from the
// shell while the duplex stops or restarts, and not from the Logic of
// the duplex's next incarnation, which never sees them. The record is
// the duplex's, not an incarnation's: it lives in the mailboxCell that
// all its incarnations share. A persistent duplex's incarnation starts
// with an empty record (see shell.begin): it recovers its calls, and the
// frames that follow on a stream open at its restart are the rest of a
// call it resumes.
//
// A call is the frames of its stream up to its caller's END; after that,
// a META on the stream is still the call's (an agent sends its approval
// decisions after its call's END), and a frame that opens the stream is
// a new call: stream ids are reused, call after call. So each stream is
// recorded with whether its caller's END has come:
//
//   - before it (answered): every frame of the stream is the call's; its
//     END ends the call;
//   - after it (ended): a META, or a frame that opens nothing (CANCEL,
//     ABORT, TOOL_RESULT, TICK, ERROR, END), is the call's; a frame that
//     opens the stream is a new call, and the stream leaves the record.
type closedStreams struct {
	calls map[string]closedCall
}

// closedCall is a recorded stream: whether its caller's END has come.
type closedCall struct {
	ended bool
}

// add records stream, whose call the shell has answered for good; ended
// says whether its caller's END has come.
func (c *closedStreams) add(stream string, ended bool) {
	if c.calls == nil {
		c.calls = make(map[string]closedCall)
	}
	c.calls[stream] = closedCall{ended: ended}
}

// drop reports whether a frame of type t on stream is a late frame of a
// recorded call, which gets nothing, and notes its caller's END. A frame
// that opens a stream whose call has ended is a new call: the stream
// leaves the record and drop reports false, as for a stream not in it.
func (c *closedStreams) drop(stream string, t messages.FrameType) bool {
	r, ok := c.calls[stream]
	switch {
	case !ok:
		return false
	case !r.ended:
		if t == messages.FrameType_END {
			r.ended = true
			c.calls[stream] = r
		}
		return true
	case t == messages.FrameType_META || !OpensStream(t):
		return true
	}
	delete(c.calls, stream)
	return false
}

// empty reports whether no stream is recorded: the shell's hot path
// looks no further then.
func (c *closedStreams) empty() bool { return len(c.calls) == 0 }

// reset forgets every stream.
func (c *closedStreams) reset() { c.calls = nil }
