package tools

import (
	"slices"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/internal/prune"
	"github.com/polyweave/polyweave-go/messages"
)

// consumerCalls holds, for a router, the streams its runtime keeps open
// (see actors.OpensStream): those its consumer wrote a call-opening frame
// on in this incarnation, with the calls the consumer has open there,
// until the model ends them (END of no id, or of the id of the stream's
// last call open: see openStream; an ERROR ends none, as for the
// runtime, which answers a call with an ERROR and an END of its id, the
// call open until that END), and those the model opened with what the
// router passed out (see emitted), which hold no call of the consumer's.
// It tells the router whether the model's END or ERROR of a tool-call id
// ends one of several calls of the consumer's alone, the stream going on
// with the others, as the runtime counts it (see endsAlone): of the
// model's calls pending there, such an END ends only the one of that id.
// A durable router also puts a restore frame's calls on the streams the
// consumer holds no call on (see has) on closed streams.
//
// It notes the consumer's frames as the runtime notes them in the
// router's shell (see note): the rest of a call the model ended, still
// on its way, opens nothing (in a durable router, whose runtime notes
// every frame, it opens that call again). Of what goes out, it notes
// only what the runtime noted: a frame the router passed out that went
// out (see routerLogic.act: the runtime drops the model's frames on a
// call it answered itself), and the END a supervisor's Resume emitted
// in the router's stead (see resumeAnswered).
//
// It keeps and forgets streams as the runtime does, at the same frames,
// for a stream it forgot and the runtime kept, or the other way round,
// is a stream on which the model's END of the consumer's call ends the
// call alone for one and the stream for the other: the model's calls
// pending there then get their answer while the model still streams
// them, or never. The first openInline streams noted (and, once one of
// them is ended, the next noted) are inline, as in the runtime's shell,
// and never forgotten; each of the others has the count of those noted
// (opens) when it was noted, as the runtime orders them by when they
// were opened, however lately written on. A stream with a call of the
// consumer's open is kept until the model ends it, as the runtime keeps
// it; of the quiet ones (see openStream.quiet) not inline, only the
// openQuiet opened last are sure to be kept (see prune): a model that
// ends the consumer's calls by their ids, and never its streams, does
// not grow it without end. A stream forgotten counts as one the
// consumer has no call open on: the model's END there ends the stream,
// whatever its id. lastOpen is the stream the consumer last wrote on,
// whose frames mostly follow each other, and lastCall the tool-call id
// noted last there: a frame of the same call changes nothing. lastEmit
// is the stream the router last passed a frame out on, kept: another
// frame there (the model's text, token after token) opens nothing. inline
// counts the inline streams; limit is the number of the others past
// which they are pruned, zero until they first are. durable is set for
// a durable router. The zero value is ready.
type consumerCalls struct {
	open     map[string]openStream
	opens    uint64
	inline   int
	limit    int
	lastOpen string
	lastCall string
	lastEmit string
	durable  bool
	// closedBy are the latest streams the model's END of a call closed
	// (see closing), the next replaced at closings%closedByMax.
	closedBy [closedByMax]streamCall
	closings int
}

// openInline is how many streams consumerCalls keeps inline, never
// forgotten, as the runtime's shell keeps them apart from the others.
const openInline = 2

// openQuiet is how many quiet streams, not inline, consumerCalls keeps
// when it is pruned, as the runtime does; it is pruned when openQuiet/4
// more streams have come.
const openQuiet = 1024

// endedMax is how many of the calls the model ended by their ids a
// stream keeps (see openStream.done), as the runtime does: the oldest
// go first. A second END of one gone ends nothing all the same (see
// openStream.endsAlone).
const endedMax = 16

// note notes f, a frame the consumer wrote that opens a call (as the
// runtime counts it: see actors.OpensStream). Unless the router is
// durable, the rest of a call the model ended, on its way, is not noted,
// as the runtime does not note it (see rest).
func (o *consumerCalls) note(f *messages.Frame) {
	stream, call := f.GetStreamId(), f.GetToolCallId()
	if stream == "" || stream == o.lastOpen && call == o.lastCall {
		return // the call noted last, as it is
	}
	st, ok := o.open[stream]
	if !o.durable && st.rest(f, ok) {
		return
	}
	if !ok {
		// The runtime opens the stream, and may prune, before it notes
		// the call: the stream is quiet, and the one opened last, then.
		o.add(stream, &st)
		o.open[stream] = st
		o.pruneIfFull()
	}
	changed := st.note(call)
	if !st.own {
		st.own, changed = true, true
	}
	o.lastOpen, o.lastCall = stream, call
	if changed {
		o.open[stream] = st
	}
}

// emitted notes f, a frame the router passed out, as the runtime notes
// what its duplex emits: a frame on a stream not kept, but a META or an
// END, opens it (the duplex owes it an END), holding no call of the
// consumer's (see has), and an END ends the stream, or one of the
// consumer's calls there (see ended). A frame the router keeps in
// opens nothing.
func (o *consumerCalls) emitted(f *messages.Frame) {
	// Another frame on the stream of the last one (the model's text,
	// token after token), the hot path, changes nothing: it is inlined.
	if f.StreamId != o.lastEmit || f.Type == messages.FrameType_END {
		o.emit(f)
	}
}

// emit is emitted for a frame that may change the streams kept.
func (o *consumerCalls) emit(f *messages.Frame) {
	stream, t := f.GetStreamId(), f.GetType()
	switch {
	case stream == "":
	case t == messages.FrameType_END:
		o.ended(stream, f.GetToolCallId())
	case t != messages.FrameType_META:
		if _, ok := o.open[stream]; !ok {
			var st openStream
			o.add(stream, &st)
			o.open[stream] = st
			o.pruneIfFull()
		}
		o.lastEmit = stream
	}
}

// resumeAnswered notes the answer a supervisor's Resume gave one of the
// consumer's calls in the router's stead: the runtime emitted an END of
// that call, or of its stream, which it notes as it notes the router's
// own (see emitted). What the router passes out of that call from then
// on the runtime drops, and it is not noted (see routerLogic.act).
func (o *consumerCalls) resumeAnswered(a actors.ResumeAnswered) {
	if a.Stream != "" {
		o.ended(a.Stream, a.ToolCallID)
	}
}

// add makes st, of a stream not kept, inline when there is room, or else
// the one noted last.
func (o *consumerCalls) add(stream string, st *openStream) {
	if o.open == nil {
		o.open = map[string]openStream{}
	}
	if o.inline < openInline {
		o.inline++
		st.inline = true
		return
	}
	o.opens++
	st.at = o.opens
}

// pruneIfFull prunes the streams once there are more of them, not
// inline, than the limit, at the frame at which the runtime prunes
// them.
func (o *consumerCalls) pruneIfFull() {
	if len(o.open)-o.inline > max(o.limit, openQuiet+openQuiet/4) {
		o.prune()
	}
}

// has reports whether the consumer has a call open on stream: it wrote
// a call-opening frame there the model has not ended (one the model
// opened alone holds none).
func (o *consumerCalls) has(stream string) bool {
	return o.open[stream].own
}

// endsAlone reports whether the model's END or ERROR of tool-call id call
// on stream ends that call alone, the stream going on with the
// consumer's other calls there (see openStream.end), or ends none of
// them: of the model's calls pending there, it ends only the one of that
// id (see Assembler.decide). So is, on a stream not kept, a second END
// of the call whose END closed it (see closing), which the runtime drops.
func (o *consumerCalls) endsAlone(stream, call string) bool {
	if st, ok := o.open[stream]; ok {
		return st.endsAlone(call)
	}
	return call != "" && o.closings > 0 && slices.Contains(o.closedBy[:], streamCall{stream, call})
}

// closedByMax is how many of the streams closed by the model's END of a
// call consumerCalls keeps in mind (see closing), as the runtime does.
const closedByMax = 16

// streamCall is a tool-call id on a stream.
type streamCall struct{ stream, call string }

// closing notes that the model's END of call, a tool-call id, closed
// stream: the runtime drops a second END of that call while the stream
// is closed, or opened since by a call of another id (see endsAlone and
// openStream.endsAlone, which takes such an END for the end of none of
// the stream's calls), of the latest closedByMax streams so closed.
func (o *consumerCalls) closing(stream, call string) {
	o.closedBy[o.closings%closedByMax] = streamCall{stream, call}
	o.closings++
}

// ended notes the model's END of tool-call id call on stream: it ends
// that call, if the stream carries it among others (see openStream.end),
// or else the stream; a second END of a call it ended so, or any END of
// an id the stream does not hold once the model ended one of its calls,
// ends nothing, as for the runtime (see openStream.endsAlone). An ERROR
// is not noted: the call, or stream, is open until its END.
func (o *consumerCalls) ended(stream, call string) {
	st, ok := o.open[stream]
	if !ok {
		return
	}
	if o.lastOpen == stream {
		o.lastOpen = "" // its entry changes
	}
	if call != "" && st.end(call) {
		o.open[stream] = st
		return
	}
	if st.endsAlone(call) {
		return // a second END of a call the model ended: it ends nothing
	}
	if st.inline {
		o.inline--
	}
	if o.lastEmit == stream {
		o.lastEmit = ""
	}
	delete(o.open, stream)
	if call != "" {
		o.closing(stream, call)
	}
}

// prune forgets, of the quiet streams (see openStream.quiet) not inline,
// all but the openQuiet opened last, as the runtime does: the model
// ended the consumer's calls there by their ids, never the stream, or
// the model opened it and the consumer wrote no call there, and the
// model has mostly moved on. They go in the order the runtime forgets
// them, by when they were opened, not written on last, whatever calls of
// the model's are pending there, of which the runtime knows nothing: a
// quiet stream the router kept after the runtime forgot it, the
// consumer's call written there then opens it anew for the runtime, that
// call alone, while the router, with the calls it noted before, would
// take the model's END of that call for the end of it alone, and leave
// the model's calls pending there waiting for an END of the stream that
// never comes. A stream with a call of the consumer's open (a call of no
// id included) is never forgotten, as the runtime never forgets it: the
// model's END of one of several calls there ends it alone however many
// streams the model leaves open, and the router keeps no more of them
// than its shell does. prune runs, as the runtime's, when a stream comes
// past openQuiet/4 more than the last pruning left (openQuiet+openQuiet/4
// at first): a write costs the pruning a constant time on average, and a
// stream that turns quiet after a pruning is forgotten at a later one.
func (o *consumerCalls) prune() {
	prune.Oldest(o.open, openQuiet, func(_ string, st openStream) bool { return !st.inline && st.quiet() },
		func(s openStream) uint64 { return s.at })
	o.limit = len(o.open) - o.inline + openQuiet/4
	if _, ok := o.open[o.lastOpen]; !ok {
		o.lastOpen = ""
	}
	if _, ok := o.open[o.lastEmit]; !ok {
		o.lastEmit = ""
	}
}

// openStream is an entry of consumerCalls.open: the consumer's calls on
// a stream, told apart by the tool-call ids of the frames that open them,
// as the runtime tells them (see actors.OpensStream): frames of no id
// are of a call of no id. A stream carries several calls once a frame of
// another call than the one noted comes (a call of no id beside one with
// an id counts); the model's END with one of their ids ends that call
// alone (see end), and one of no id, or of the id of a stream's sole
// call, ends the stream. The model's second END of a call it ended so
// ends nothing, as does, once it ended one, an END of an id the stream
// does not hold (see endsAlone).
type openStream struct {
	at     uint64   // consumerCalls.opens when it was noted (see add), if not inline
	inline bool     // it is kept inline, never forgotten (see consumerCalls)
	own    bool     // the consumer wrote a call-opening frame on it (see consumerCalls.has)
	call   string   // the tool-call id noted last of its calls
	calls  []string // its calls known by their ids, when several
	// done holds the last endedMax calls the model ended by their ids
	// (see end), until a TOOL_CALL or DESCRIBE of the id begins the call
	// again: a frame of one is the rest of the call (see rest).
	done  []string
	anon  bool // it carries a call of no id
	spent bool // the model ended a call of it by its id
}

// rest reports whether f, a frame the consumer wrote that opens a call
// on a stream held (as s) when held, is the rest of a call the model
// ended, on its way, which the runtime of a router that is not durable
// does not note (see actors.OpensStream and the rule of package actors):
// an argument chunk of a call the stream does not hold (on a stream not
// held, or of an id not among its calls, or, when the stream holds none
// by its id, after the model ended one by its id), or a frame with the
// id of a call the model ended on the stream (see done) but a TOOL_CALL
// or a DESCRIBE, which begin that call again.
func (s *openStream) rest(f *messages.Frame, held bool) bool {
	call := f.GetToolCallId()
	if f.IsToolArgChunk() {
		return !held || !(call == "" || call == s.call || s.call == "" && len(s.calls) == 0 && !s.spent ||
			slices.Contains(s.calls, call))
	}
	t := f.GetType()
	return call != "" && t != messages.FrameType_TOOL_CALL && t != messages.FrameType_DESCRIBE && slices.Contains(s.done, call)
}

// quiet reports whether the stream holds no call of the consumer's open:
// the model ended its calls by their ids, and only frames of no id, if
// any, came beside them. It may be forgotten (see consumerCalls.prune).
func (s openStream) quiet() bool {
	return s.call == "" && len(s.calls) == 0 && (s.spent || !s.anon)
}

// note notes call, the tool-call id of a frame that opens a call on the
// stream, and reports whether that changed the entry. A call the model
// ended noted again is open again.
func (s *openStream) note(call string) bool {
	reopened := false
	if call != "" && len(s.done) > 0 {
		if i := slices.Index(s.done, call); i >= 0 {
			s.done, reopened = slices.Delete(s.done, i, i+1), true
		}
	}
	switch {
	case call == "":
		if s.anon {
			return reopened
		}
		s.anon = true
	case call == s.call:
		return reopened
	case s.call != "":
		if len(s.calls) == 0 {
			s.calls = []string{s.call}
		}
		if !slices.Contains(s.calls, call) {
			s.calls = append(s.calls, call)
		}
		fallthrough
	default:
		s.call = call
	}
	return true
}

// end ends the call of tool-call id call, when the stream carries it
// among other calls, and reports whether it did: the stream stays open
// for the others. It reports false, the entry unchanged, when the stream
// carries a single call, or none of that id: the END ends the stream.
func (s *openStream) end(call string) bool {
	if !s.among(call) {
		return false
	}
	s.spent = true
	if !slices.Contains(s.done, call) {
		if len(s.done) == endedMax {
			s.done = slices.Delete(s.done, 0, 1)
		}
		s.done = append(s.done, call)
	}
	i := slices.Index(s.calls, call)
	if i < 0 {
		s.call = "" // the call of no id is left
		return true
	}
	s.calls = slices.Delete(s.calls, i, i+1)
	if s.call == call {
		s.call = s.calls[len(s.calls)-1]
	}
	if len(s.calls) == 1 {
		s.calls = nil
	}
	return true
}

// endsAlone reports whether the model's END or ERROR of tool-call id
// call ends that call alone, the stream staying open for its others (see
// end), or ends none of them, without changing the entry, as the runtime
// takes it: a second END of a call the model ended (one in done, or one
// ended past endedMax), or an END with an id the stream never carried
// while it holds a call (the model's answer to a frame of no call it
// knows), which nothing tells from the former; so is one of an id the
// stream never carried beside a call of no id, once the model ended a
// call there by its id. An END with the id of the stream's sole call
// ends the stream, as does any on a stream that holds no call of the
// consumer's (one the model opened), and any on a stream whose calls
// carry no id, none ended by an id (a prompt): the END of its call,
// which the model gave an id.
func (s *openStream) endsAlone(call string) bool {
	return call != "" && (s.among(call) || call != s.call && (s.call != "" || s.anon && s.spent))
}

// among reports whether the stream carries the call of tool-call id call
// among other calls (see end).
func (s *openStream) among(call string) bool {
	return call != "" && (slices.Contains(s.calls, call) || call == s.call && s.anon && len(s.calls) == 0)
}
