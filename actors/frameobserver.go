package actors

import "github.com/polyweave/polyweave-go/messages"

// FrameObserver sees one incarnation of a duplex from inside its actor:
// the messages its Logic receives, the frames it emits, the end of each
// turn and the end of the incarnation. It is what an inspector or a
// tracer uses instead of decorating the Logic and its Context, which
// would put two dynamic calls and a wrapper's code on every frame. Set
// [Spec.Observe] to have one.
//
// Its methods run on the actor's goroutine, one at a time, like the
// Logic's: an observer of one incarnation needs no lock for its own
// state. They must not block. A panic in Received, Emitted or Handled
// fails the incarnation as a panic of the Logic would; one in Ended is
// logged.
type FrameObserver interface {
	// Received is called with each message the Logic is about to get
	// through Receive ([Started] first), and reports whether the Logic
	// gets it: false keeps from it a message of the observer's own (one
	// sent to the duplex for the observer). c is the Context the Logic
	// gets, valid for this call only: what the observer emits with it
	// goes to Emitted too. A child's frame delivered to a
	// [ChildFrameReceiver] is not passed to Received.
	Received(c Context, msg any) bool
	// Emitted is called with each frame the Logic (or Received) emits,
	// in order, before it goes out, and reports whether it goes out. It
	// is not called for a frame the runtime drops (one on a call already
	// answered), nor for the ERROR and END the runtime emits itself to
	// close the streams left open when an incarnation ends, or to answer
	// a call a supervisor's Resume answered.
	Emitted(f *messages.Frame) bool
	// Handled is called after the Logic handled a message (or after
	// Received kept one from it): the end of a turn. It is not called
	// when the Logic's handling failed the incarnation.
	Handled()
	// Ended is called once when the incarnation ends (failed, restarted
	// or stopped), after the Logic's [FailureHandler], with the same
	// err, and before the runtime closes the streams still open.
	Ended(err error)
}
