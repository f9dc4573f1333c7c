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
//
// The record is bounded: it holds the last closedMax streams recorded
// (each found with one map lookup). A stream recorded closedMax records
// ago, and neither reused nor recorded again since, is forgotten: its
// late frames are taken as any other stream's, so one that opens the
// stream is a new call (refused while the duplex stops or restarts, run
// by a new incarnation) and the others reach the Logic. Only a duplex
// with more than closedMax calls open at its end, or one that closes and
// refuses that many while its calls' late frames are still to come,
// forgets a stream whose late frames come after that.
type closedStreams struct {
	calls map[string]closedCall
	// order holds the streams as recorded, oldest first from head once
	// it has closedMax entries (a ring); an entry whose seq is no longer
	// its stream's in calls is stale (the stream left the record, or was
	// recorded again since) and only waits for its turn to be dropped.
	order []closedEntry
	head  int
	seq   uint64 // of the last record
}

// closedCall is a recorded stream: when it was recorded, and whether
// its caller's END has come.
type closedCall struct {
	seq   uint64
	ended bool
}

type closedEntry struct {
	stream string
	seq    uint64
}

// closedMax is how many streams a duplex's record of closed calls holds
// at most (see closedStreams).
const closedMax = 1024

// add records stream, whose call the shell has answered for good; ended
// says whether its caller's END has come.
func (c *closedStreams) add(stream string, ended bool) {
	if c.calls == nil {
		c.calls = make(map[string]closedCall)
	}
	c.seq++
	e := closedEntry{stream: stream, seq: c.seq}
	if len(c.order) < closedMax {
		c.order = append(c.order, e)
	} else {
		old := c.order[c.head]
		if r, ok := c.calls[old.stream]; ok && r.seq == old.seq {
			delete(c.calls, old.stream)
		}
		c.order[c.head] = e
		c.head = (c.head + 1) % closedMax
	}
	c.calls[stream] = closedCall{seq: c.seq, ended: ended}
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
	if len(c.calls) == 0 {
		c.reset() // the ring's entries are all stale: free them
	}
	return false
}

// empty reports whether no stream is recorded: the shell's hot path
// looks no further then.
func (c *closedStreams) empty() bool { return len(c.calls) == 0 }

// reset forgets every stream.
func (c *closedStreams) reset() {
	c.calls, c.order, c.head = nil, nil, 0
}
