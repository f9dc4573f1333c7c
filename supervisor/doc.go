// Package supervisor decides what happens when a Polyweave actor fails.
//
// A [Strategy] is handed to the actor that parents a subtree; when one of its
// children fails, the strategy asks a [Decider] what to do with the failure
// (resume, restart, stop or escalate), enforces a restart intensity (at most
// MaxRestarts restarts within a window, after which the subtree is stopped),
// optionally backs off before restarting, and reports every decision as an
// [Event] to an observer. One-for-one strategies act on the failed child
// alone; all-for-one strategies act on all of the parent's children.
//
// Deciders choose with errors.As on typed errors, never on strings:
//
//	decide := supervisor.Decide(
//		supervisor.On[*ConfigError](supervisor.Stop),
//		supervisor.On[*actors.PanicError](supervisor.Restart),
//	)
//
// Failures always end in frames: the actors package closes every stream a
// failed duplex had open with an ERROR and an END frame, whatever the
// directive. This package only decides; it never drops a message.
package supervisor
