// Package actors is Polyweave's duplex-as-actor runtime on protoactor-go.
//
// Every stream stage ("duplex") is an actor. Frames sent to its [Ref] are
// its sink; the frames it emits go to its subscriber (its source): the
// actor that spawned it, a sibling it is piped into, or a [Conn] held by
// plain Go code. Frames of one stream keep their order end to end.
//
// The behaviour of a duplex is a [Logic]: a plain value whose Receive is
// called with one message at a time and acts through a [Context] (emit,
// send, spawn children, run background work with Go, set timers, fail). A
// Logic holds no locks, starts no goroutines and reads no clock, so most
// of it is tested by driving it with actorstest.Recorder, without an
// actor system. The runtime wraps each Logic in a protoactor actor (the
// "shell") that:
//
//   - turns a panic into a supervised failure ([PanicError]);
//   - on failure, restart or stop, lets the Logic answer for its open work
//     ([FailureHandler]) and then closes every stream still open with an
//     ERROR and an END frame, so no consumer waits forever: each call
//     of the stream known by its tool-call id gets a pair with its id
//     (a stream may carry several calls: see below), in the order the
//     calls came, and a call whose frames carry no id, or a stream of
//     no call known, a pair with none, after the others (a
//     [Spec.Durable] duplex, which recovers its calls, closes a stream
//     with one pair, with the id of its call when it carries one call
//     with an id). A stream whose calls known by their ids the Logic has
//     all ended, left open by frames of no id beside them (a model that
//     writes its text beside its tool calls and never ends the stream),
//     or one the Logic opened with no call, is quiet: of the quiet
//     streams, a duplex keeps the 1024 opened last beyond a few, and an
//     older one is forgotten: it gets no pair, and a later frame on it
//     is a new stream. A stream with a call open is never forgotten. A
//     frame that opens a new call while the actor is
//     still stopping or restarting (its children finishing) is refused
//     the same way (its ERROR and END carry the frame's tool-call id),
//     never given to the Logic, also when it had failed: stopped by its supervisor or
//     its parent's end, it waits for no decision. A Context.Stop of a
//     failed duplex waits in its queue for its supervisor's decision (a
//     restart's backoff included), and then wins over the restart: its
//     Logic is not started again;
//   - tells, on the stream of a call it answered itself (closed at a
//     restart or stop, refused, or answered for a Resume) before the
//     call's caller sent its END, the answered call's rest from a new
//     call (stream ids are reused) by the frames' tool-call id, the
//     answered call's being the last one its caller's frames that opened
//     or continued it carried (a call a Resume answered alone among the
//     calls of its stream has for its rest only the frames that carry its
//     id: see below). A new call is never dropped: it is refused
//     while the duplex stops or restarts, as above, and served otherwise.
//     It is a TOOL_CALL (a call's first frame: one with the answered
//     call's id is that call sent again), a DESCRIBE (a whole call in
//     one frame, ended by no END), or a frame that opens a call (any
//     but META, END, CANCEL, ABORT, TICK, TOOL_RESULT) and carries an
//     id other than the answered call's (and than those of the
//     stream's other calls answered with it, or ended by the Logic
//     before, and, the answered call a refused one, those of the
//     calls answered on the stream before it: their rest), but an
//     argument chunk (its
//     call's TOOL_CALL came first: a chunk of another id is of a call
//     interleaved with the answered one on its stream). The other
//     frames, up to the caller's END and that END included, are the
//     answered call's rest, dropped: its argument chunks still in
//     flight, its CANCEL, its END, none given to the Logic. A new call
//     served there does not end that rest: up to the caller's END, a
//     frame with the id of the answered call (or of those others) but
//     a TOOL_CALL or DESCRIBE is still its rest, dropped, by the
//     incarnation that serves the new call and by a next one (what the
//     Logic emits with such an id too), so that it is not taken for a
//     new call a stop or restart would answer a second time. Once the
//     caller's META tool_complete of such a call came (the end of its
//     arguments; dropped after the answer, or before it, to the
//     incarnation that answered the call), a frame with its id that opens a call, but an
//     argument chunk, is no rest of it: a new call reusing the id (a
//     PARAM may open one), served. A frame that
//     opens a call and carries no id (PARAM, TEXT) cannot be told by it: in
//     the incarnation that answered the call (restarting, stopping or
//     resumed) it is the call's rest, dropped up to the caller's END (a
//     caller whose frames carry no ids ends its call with END) or up to
//     a new call on the stream, whose it is from then on (delivered by a
//     resumed incarnation, dropped as the rest of the call an ended one
//     refused); in a next incarnation it is a new call, served. A next incarnation also lets
//     through a META (it may follow a call's END: an approval decision),
//     but a tool_complete one (the end of the answered call's arguments),
//     and what comes while it has a call of its own open on the stream
//     (but, once a new call was served there, the rest above, and the
//     rest of a call a Resume answered alone, told by its id),
//     and a [Spec.Durable] duplex, which recovers its calls, gets every
//     frame once restarted. A caller stops sending a call once it has
//     the call's answer (its ERROR and END included). Of the streams
//     whose call was answered and whose caller's END has not come, an
//     incarnation records the latest 1024 it answered and the latest
//     1024 its earlier ones did. The late frames of one forgotten (more
//     than 1024 others answered while they were on their way) reach the
//     Logic, running or resumed, which knows no call of theirs: a Logic
//     that answers such a frame (with an END of its own for a chunk of
//     no call it knows, say) answers the call a second time. An
//     incarnation that has ended gives them no second answer: it
//     refuses only frames that open a call, never an argument chunk
//     (its call's TOOL_CALL came before it, so its call was open when
//     the incarnation ended, or refused);
//   - on a supervisor's Resume, keeps the Logic and its state, and answers
//     the call whose frame failed it with an ERROR of failure kind
//     [FailedKind] and END before the next message: that call has its
//     answer, so the rest of its frames (as above) and what the Logic
//     still emits on it are dropped, and its work stopped (the jobs
//     keyed by its stream id cancelled, a CANCEL of it delivered, after
//     a [ResumeAnswered] that tells the Logic which call, or stream, the
//     runtime answered in its stead, with which END). A
//     stream may carry several calls at once (a dispatcher's calls of
//     one model response, on a tool actor): the runtime knows them by
//     the tool-call ids of their frames, a call ending at the Logic's
//     END with its id (an END without one ends the stream, and every
//     call on it). An argument chunk of a call the Logic ended, still
//     on its way, is delivered but opens nothing: a restart or stop
//     does not answer that call a second time (a [Spec.Durable] duplex,
//     which recovers its calls, notes it open as before). So is a frame
//     with the id of a call the Logic ended (of the latest 16 it ended
//     on a stream still open for others) but a TOOL_CALL or DESCRIBE,
//     which begins that call again, a new one (models number the calls
//     of each response afresh), or, once the caller's META tool_complete
//     of the call came (the end of its arguments), any frame but an
//     argument chunk, a new call reusing the id; and the Logic's second END of an ended
//     call, however long ago it ended, ends none of the stream's others
//     (one of those 16 is dropped, not passed on: a consumer that reads
//     the stream call by call, up to each one's END, would take it for
//     the next call's; so is a second END of the call whose END closed
//     the stream, of the latest 16 streams so closed, on the stream
//     closed or opened since by a call of another id; nor does an END
//     with an id the stream never
//     carried, while it holds a call with an id, or one of no id beside
//     calls the Logic ended by their ids: the Logic's answer to a frame of
//     no call the runtime knows, a late chunk say, leaves the stream's
//     calls open, to be answered once; a stream whose calls carry no id,
//     none ended by an id, is closed by it, the END of its call, which the
//     Logic gave an id). When the failed frame carries
//     the id of one of
//     them, the Resume answers that call alone: its ERROR and END carry
//     its id, its rest is the frames that carry it (and those of the
//     calls answered on the stream before it: their rest), but its
//     TOOL_CALL, a DESCRIBE, or once the caller's META tool_complete of
//     the call came any frame but an argument chunk (a new call), what
//     the Logic emits with its id is dropped up to the Logic's END of
//     it or such a new call, the Logic gets
//     a CANCEL with its id, and the jobs keyed by the stream id run on
//     (they may be the other calls'); the stream's other calls go on,
//     their frames delivered (the caller's END of the stream included),
//     their answers the Logic's. A failed frame with the id of a call
//     the Logic ended (its late argument chunk, its caller's CANCEL),
//     on a stream still open for others, is of a call that has its
//     answer: the Resume answers none, the others are the Logic's to
//     answer. A failed frame of no call (one with no
//     id, the caller's END say) fails the stream: the Resume answers it
//     for all its calls, with no id, and what the Logic emits on it is
//     dropped up to its END of the stream (a call whose frames carry
//     no id is one of the stream's calls: the failed frame of a call
//     with an id beside it is answered alone, as above); a duplex
//     resumed after escalating a child's failure resumes that
//     child the same way (a restart or stop of it stops the child with
//     it), and so does the runtime's top-level supervisor resumed by its
//     host actor's strategy (see [RuntimeOptions].Parent);
//   - cancels the Logic's background work and timers with its incarnation.
//
// [Wrap] builds the bidirectional wrapper: an actor that owns an inner
// duplex as its child and runs a request hook on frames going in and a
// response hook on frames coming out ([Wrapped], [Hooks]). [Pipe] chains
// duplexes and [Join] merges them. A Wrapped that keeps its own record
// of the streams its duplex owes an END, as the runtime keeps them (a
// router telling the END of one call from the END of a stream), notes
// only what the runtime noted: a frame it passed out that went out
// ([WrapperContext].ToOuterPassed reports it; one on a call the runtime
// answered itself does not), and the END a Resume emitted in its stead
// ([ResumeAnswered]).
//
// A [Runtime] owns the actor system and its top-level supervisor (spawned
// with an explicit guardian: protoactor ignores WithSupervisor on
// top-level actors). [Runtime.Start] spawns a duplex under it and returns
// a [Conn]; [Runtime.Close] stops every actor and returns when they and
// their background work are gone. A supervisor's decision is carried out
// on the duplex it was taken about: a restart that waits for a backoff is
// dropped when that duplex stopped meanwhile, even if a new one took its
// name, and the runtime's observers are told of a restart only as it is
// carried out (see [RuntimeOptions].OnSupervision). protoactor's logger
// is redirected to the
// *slog.Logger in [RuntimeOptions] (silent by default).
package actors
