package tools

import (
	"slices"

	"github.com/polyweave/polyweave-go/internal/prune"
)

// consumerCalls holds, for a router, the streams its consumer wrote a
// call-opening frame on (as the runtime counts them: see
// actors.OpensStream) in this incarnation, with the calls the consumer
// has open there, until the model ends them (END of no id, or of the id
// of the stream's last call open: see openStream; an ERROR ends none, as
// for the runtime, which answers a call with an ERROR and an END of its
// id, the call open until that END). It tells the router whether the
// model's END or ERROR of a tool-call id ends one of several calls of
// the consumer's alone, the stream going on with the others, as the
// runtime counts it (see endsAlone): of the model's calls pending there,
// such an END ends only the one of that id. A durable router also puts a
// restore frame's calls on the streams not held here on closed streams.
//
// Each stream has the count of such writes (opens) at its last one on
// another stream than the one before; of those without a pending call,
// only the openQuiet written on last are sure to be kept (see prune): a
// model that never ends its streams does not grow it without end. A
// stream forgotten counts as one the consumer has no call open on: the
// model's END there ends the stream, whatever its id. lastOpen is the
// stream last written on, whose frames mostly follow each other, and
// lastCall the tool-call id noted last there: a frame of the same call
// changes nothing. openCap is the size past which open is pruned. The
// zero value is ready.
type consumerCalls struct {
	open     map[string]openStream
	opens    uint64
	openCap  int
	lastOpen string
	lastCall string
}

// openQuiet is how many streams without a pending call consumerCalls
// keeps when it is pruned; it is pruned when openQuiet/4 more have come.
const openQuiet = 1024

// note notes that the consumer wrote a frame that opens a call of
// tool-call id call (as the runtime counts it) on stream; p is the
// router's pending calls (a stream with one is never forgotten).
func (o *consumerCalls) note(stream, call string, p *PendingCalls) {
	if stream == "" || stream == o.lastOpen && call == o.lastCall {
		return // the call noted last, as it is
	}
	if o.open == nil {
		o.open, o.openCap = map[string]openStream{}, openQuiet+openQuiet/4
	}
	st, ok := o.open[stream]
	changed := st.note(call)
	if stream != o.lastOpen || !ok {
		o.opens++
		st.at, o.lastOpen, changed = o.opens, stream, true
	}
	o.lastCall = call
	if changed {
		o.open[stream] = st
	}
	if len(o.open) > o.openCap {
		o.prune(p)
	}
}

// has reports whether the consumer has a call open on stream.
func (o *consumerCalls) has(stream string) bool {
	_, ok := o.open[stream]
	return ok
}

// endsAlone reports whether the model's END or ERROR of tool-call id call
// on stream ends that call alone, the stream going on with the
// consumer's other calls there (see openStream.end): of the model's calls
// pending there, it ends only the one of that id (see Assembler.decide).
func (o *consumerCalls) endsAlone(stream, call string) bool {
	if len(o.open) == 0 {
		return false
	}
	st, ok := o.open[stream]
	return ok && st.endsAlone(call)
}

// ended notes the model's END of tool-call id call on stream: it ends
// that call, if the stream carries it among others (see openStream.end),
// or else the stream. An ERROR is not noted: the call, or stream, is
// open until its END.
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
	delete(o.open, stream)
}

// prune forgets, of the streams the consumer has a call open on without
// a pending call in p, all but the openQuiet it wrote on last: their
// model never ended them, and has mostly moved on. No pending call is
// lost to it: a stream with one is never forgotten. (Should the model
// start calls on a stream forgotten, its END of one of the consumer's
// calls there ends the stream, and them.) open is pruned again once
// openQuiet/4 more streams are in it, so that a write costs the pruning a
// constant time on average.
func (o *consumerCalls) prune(p *PendingCalls) {
	prune.Oldest(o.open, openQuiet, func(stream string, _ openStream) bool { return p.InStream(stream) == 0 },
		func(s openStream) uint64 { return s.at })
	o.openCap = len(o.open) + openQuiet/4
	if !o.has(o.lastOpen) {
		o.lastOpen = ""
	}
}

// openStream is an entry of consumerCalls.open: the consumer's calls on
// a stream, told apart by the tool-call ids of the frames that open them,
// as the runtime tells them (see actors.OpensStream): frames of no id
// are of a call of no id. A stream carries several calls once a frame of
// another call than the one noted comes (a call of no id beside one with
// an id counts); the model's END with one of their ids ends that call
// alone (see end), and one of no id, or of the id of a stream's sole
// call, ends the stream.
type openStream struct {
	at    uint64   // consumerCalls.opens at its last write (see note)
	call  string   // the tool-call id noted last of its calls
	calls []string // its calls known by their ids, when several
	anon  bool     // it carries a call of no id
}

// note notes call, the tool-call id of a frame that opens a call on the
// stream, and reports whether that changed the entry.
func (s *openStream) note(call string) bool {
	switch {
	case call == "":
		if s.anon {
			return false
		}
		s.anon = true
	case call == s.call:
		return false
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
	if !s.endsAlone(call) {
		return false
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
// end), without changing the entry.
func (s *openStream) endsAlone(call string) bool {
	if call == "" {
		return false
	}
	return slices.Contains(s.calls, call) || call == s.call && s.anon && len(s.calls) == 0
}
