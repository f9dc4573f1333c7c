package actors

import (
	"slices"

	"github.com/polyweave/polyweave-go/messages"
)

// closedCalls are the streams whose call an earlier incarnation of a
// duplex answered for good (the ERROR and END of its end, a refusal while
// it restarted, a Resume's answer) before the call's caller sent its
// END. The caller's frames on such a stream that open no call (its END, a
// CANCEL, an ABORT, a TICK, a TOOL_RESULT) are that answered call's: they
// are dropped, not delivered to the next incarnation's Logic, which knows
// no call there and would answer them again (a second END on a stream
// that had its END). The caller's END ends the record of its stream.
//
// A frame that opens a call (see opensCall) and carries the answered
// call's tool-call id (see answeredCall) is that call's rest still in
// flight (a chunk of its arguments): dropped too, as is a chunk of
// another call's arguments (one interleaved with it on the stream). Any
// other frame that opens a call on the stream is delivered, and ends the
// record but for the answered calls' own ids (see closedCall.served): a
// new call (stream ids are reused call after call), told by its
// tool-call id (see closedCall.newCall), or one that carries no id,
// which cannot be told from the answered call's rest and is taken for a
// new call (see the package doc). So a caller that never sends an END (a whole
// TOOL_CALL, a streaming call that ends at its tool_complete) has its
// next call served. A META opens no call but is delivered: it is about a
// call and may come after the call's END (an approval decision), as on
// any stream with no call open; but a META tool_complete, the end of a
// streaming call's arguments, is the answered call's (or one interleaved
// with it), dropped. Nothing is dropped while the incarnation
// has a call of its own open on the stream, but that, once a new call
// was served there, the frames that carry the answered calls' ids (but
// a TOOL_CALL or a DESCRIBE) are still their rest, dropped (see
// closedCall.served), up to the caller's END.
//
// A call a Resume answered alone, the other calls of its stream going on
// (shared: see shell.resumed), has for its rest only the frames that
// carry its tool-call id, or that of a call answered on the stream
// before it (see shell.noteAnswered), but a TOOL_CALL (the call sent
// again), a DESCRIBE or, its arguments complete, a frame that opens a
// call (see below), each a new call, which ends the record; the other
// frames of the stream are the other calls', delivered, and that rest is
// dropped also while the incarnation has a call of its own open on the
// stream (one of another id). The caller's END ends the record, as any.
//
// A call whose caller's META tool_complete came, after its answer (the
// end of its arguments, dropped) or before it (see shell.argsDone), has
// no rest left that opens a call: a frame
// with its id that opens one, but an argument chunk, is a new call
// reusing the id (see closedCall.complete), served; on a shared record
// too. An argument chunk with its id opens no call: dropped.
//
// A caller that never sends its END leaves its stream in the record: past
// closedMax streams, the oldest are forgotten (their late frames reach the
// Logic, as before the record; an ended incarnation refuses none of them
// but a frame that opens a call, see shell.late). The calls an incarnation answers itself
// (shell.answered) are kept in a closedCalls too, bounded the same way: a
// resumed incarnation may live long, answering calls on streams whose
// callers send no END.
type closedCalls struct {
	bounded[string, closedCall] // by stream
}

// closedCall is a stream's record in closedCalls.
type closedCall struct {
	call answeredCall // the answered call's tool-call id
	// others are the tool-call ids of the stream's other calls, when it
	// carried several: answered with it (at an incarnation's end, or a
	// Resume's for the stream) or ended by the Logic before. A frame with
	// one of their ids, sent before the answer, is their rest, as one
	// with call's is its (see newCall); a TOOL_CALL with one is a new call.
	others []string
	// shared: the call was answered alone, the other calls of its
	// stream going on (a Resume's answer: see shell.resumed). Its rest
	// is then the frames that carry its id, or one of its others' (the
	// calls of the records it replaced), alone (see sharedRest).
	shared bool
	// served: a new call on the stream was served after the answer (see
	// afterNewCall). The record's rest is then the frames that carry the
	// id of its call or of one of its others (see servedRest); the
	// stream's other frames are the new call's, or later ones'.
	served bool
	// complete are those of its calls (call, others) whose caller's
	// META tool_complete, the end of their arguments, came, after the
	// answer (see completes) or before it (see shell.argsDone): a frame with one of their ids that opens
	// a call (but an argument chunk) is no rest of theirs, but a new
	// call reusing the id (models number the calls of each response
	// afresh, and a PARAM may open one).
	complete []string
}

// completes returns r once f, a frame on its stream, is the caller's
// META tool_complete of one of r's calls (see closedCall.complete); ok
// reports whether it is one not noted yet.
func (r closedCall) completes(f *messages.Frame) (_ closedCall, ok bool) {
	call := f.GetToolCallId()
	if !f.IsToolComplete() || !r.holds(call) || slices.Contains(r.complete, call) {
		return r, false
	}
	r.complete = append(slices.Clip(r.complete), call)
	return r, true
}

// reuses reports whether f opens a new call with the id of one of r's
// calls whose arguments were complete (see closedCall.complete).
func (r closedCall) reuses(f *messages.Frame) bool {
	return len(r.complete) > 0 && opensCall(f.GetType()) && !f.IsToolArgChunk() &&
		slices.Contains(r.complete, f.GetToolCallId())
}

// afterNewCall returns the record that follows r on its stream once f,
// a new call there (see newCall, drop), is served: r's calls, whose
// rest their caller may still have on its way (sent before it had their
// answer, after f), but f's own when f is a TOOL_CALL (that call sent
// again); ok reports whether any is left to keep.
func (r closedCall) afterNewCall(f *messages.Frame) (_ closedCall, ok bool) {
	again := ""
	if f.GetType() == messages.FrameType_TOOL_CALL || r.reuses(f) {
		again = f.GetToolCallId()
	}
	next := closedCall{served: true, others: r.carried(nil, again)}
	if len(next.others) == 0 {
		return closedCall{}, false
	}
	for _, c := range r.complete {
		if c != again {
			next.complete = append(next.complete, c)
		}
	}
	next.call, next.others = answeredCall(next.others[0]), next.others[1:]
	return next, true
}

// holds reports whether call, a tool-call id, is r's call's or one of
// its others'.
func (r closedCall) holds(call string) bool {
	return call != "" && (call == string(r.call) || slices.Contains(r.others, call))
}

// keptRest is sharedRest or servedRest, as r is a shared or a served
// record: records kept past their stream's new calls until the caller's
// END, whose rest is told by id alone. kept is false for any other
// record.
func (r closedCall) keptRest(f *messages.Frame) (rest, ends, kept bool) {
	switch {
	case r.shared:
		rest, ends = r.sharedRest(f)
	case r.served:
		rest, ends = r.servedRest(f)
	default:
		return false, false, false
	}
	return rest, ends, true
}

// servedRest reports, of f, a frame on the stream of r, a served record
// (see closedCall.served), whether it is the rest of r's calls, to be
// dropped: one that carries the id of one of them, but a TOOL_CALL (that
// call sent again, a new call), a frame that opens a call with the id
// of one whose arguments were complete (see closedCall.complete) or a
// DESCRIBE (a whole call in one frame); and whether it ends the record:
// the caller's END, or a new call with the id of one of r's calls (a
// caller reuses a call's id once it has the call's answer, and its
// rest with it).
func (r closedCall) servedRest(f *messages.Frame) (rest, ends bool) {
	switch t := f.GetType(); {
	case t == messages.FrameType_END:
		return false, true
	case !r.holds(f.GetToolCallId()):
		return false, false
	case t == messages.FrameType_TOOL_CALL || r.reuses(f):
		return false, true
	case t == messages.FrameType_DESCRIBE:
		return false, false
	}
	return true, false
}

// carried returns others, the other calls of a record that replaces r
// on its stream (a refused call's: see shell.refuse), with r's calls but
// call, the replacing record's own: the last carriedMax of them, so
// that a stream on which call after call is refused keeps a bounded
// record.
func (r closedCall) carried(others []string, call string) []string {
	n := len(others)
	for i := range len(r.others) + 1 {
		c := string(r.call)
		if i < len(r.others) {
			c = r.others[i]
		}
		if c != "" && c != call && !slices.Contains(others, c) {
			others = append(others, c)
		}
	}
	if over := len(others) - n - carriedMax; over > 0 {
		others = slices.Delete(others, n, n+over)
	}
	return others
}

// carriedMax is how many calls of the records it replaces a refused
// call's record keeps (see closedCall.carried).
const carriedMax = endedMax

// closedMax bounds the streams closedCalls keeps.
const closedMax = 1024

// inherit returns the record of a new incarnation, prev's the one that
// ended: what prev kept of the earlier ones, and the streams it answered
// (see shell.answered), oldest first. Nil when there are none.
func inherit(prev *shell) *closedCalls {
	c, answered := prev.closed, prev.answered
	switch {
	case answered.len() == 0:
	case c.len() == 0:
		c = answered // prev has ended: its record is the next one's
	default:
		// In the order added: the oldest are forgotten first, in an
		// order that does not depend on the map's.
		answered.each(c.addRecord)
	}
	if c.len() == 0 {
		return nil
	}
	return c
}

// len returns how many streams c records; none for a nil c.
func (c *closedCalls) len() int {
	if c == nil {
		return 0
	}
	return c.bounded.len()
}

// get returns the record of stream id, if c holds one.
func (c *closedCalls) get(id string) (closedCall, bool) {
	if c == nil {
		return closedCall{}, false
	}
	return c.bounded.get(id)
}

// add records the call on stream id, of tool-call id call, answered:
// alone among the stream's calls when shared (see closedCall).
func (c *closedCalls) add(id string, call answeredCall, shared bool) {
	c.addRecord(id, closedCall{call: call, shared: shared})
}

// addRecord records r, the call answered on stream id.
func (c *closedCalls) addRecord(id string, r closedCall) { c.bounded.add(id, r) }

// drop reports whether f, written into the sink of an incarnation whose
// open streams are open, is a late frame of a call an earlier
// incarnation answered, to be dropped; the caller's END and a frame that
// opens a new call (one that carries no tool-call id included) end the
// record of the stream.
func (c *closedCalls) drop(f *messages.Frame, open *openStreams) bool {
	id := f.GetStreamId()
	rec, ok := c.bounded.get(id)
	if !ok {
		return false
	}
	if f.IsToolComplete() {
		// Not on the argument chunks' path: a record is copied.
		if next, ok := rec.completes(f); ok {
			rec = next
			c.addRecord(id, rec)
		}
	}
	if rest, ends, kept := rec.keptRest(f); kept {
		if ends {
			c.remove(id)
		}
		if f.GetType() == messages.FrameType_END {
			return !open.has(id) // as any record's END: see below
		}
		// What carries an answered call's id is its rest, the stream
		// open or not: a call of this incarnation's that opened it
		// since has another id.
		return rest
	}
	switch t := f.GetType(); t {
	case messages.FrameType_END:
		c.remove(id)
	case messages.FrameType_META:
		if !f.IsToolComplete() {
			return false // about a call, as an approval decision: see above
		}
		// The completion of a streaming call's arguments: of a call
		// begun before the answer (its TOOL_CALL after it would have
		// ended the record), and none to be answered again.
	default:
		if opensCall(t) && (f.GetToolCallId() == "" || rec.newCall(f)) {
			// A new call, served: the rest of the answered calls may
			// still come after it (see afterNewCall).
			if next, ok := rec.afterNewCall(f); ok {
				c.addRecord(id, next)
			} else {
				c.remove(id)
			}
			return false
		}
	}
	return !open.has(id)
}
