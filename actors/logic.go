package actors

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/persistence"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// Logic is the behaviour of one duplex actor: a plain value, driven one
// message at a time. Receive is never called concurrently, so a Logic needs
// no locks; it must not block (run slow work with [Context.Go]).
//
// The messages a Logic receives are:
//   - *messages.Frame: a frame written into the duplex's sink;
//   - [Started]: the first message of every incarnation;
//   - [ChildFrame]: a frame emitted by a child whose subscriber is this actor;
//   - [ChildStopped]: a child has stopped;
//   - [AsyncProgress] and [AsyncDone]: news from work started with Context.Go;
//   - [Timer]: a timer set with Context.After fired;
//   - [ResumeAnswered]: a supervisor's Resume answered one of its calls.
//
// A Logic may also implement [FailureHandler].
type Logic interface {
	Receive(c Context, msg any)
}

// LogicFunc adapts a function to [Logic].
type LogicFunc func(c Context, msg any)

// Receive calls f(c, msg).
func (f LogicFunc) Receive(c Context, msg any) { f(c, msg) }

// FailureHandler is implemented by a Logic that answers for its own open
// work when its incarnation ends by a failure, a restart or a stop: a tool
// answers its pending calls with error results, for example. OnFailure runs
// before the runtime closes the streams still open with ERROR and END, and
// only once per incarnation. err wraps [ErrStopped] when the actor was
// stopped rather than failed.
type FailureHandler interface {
	OnFailure(c Context, err error)
}

// ChildFrameReceiver is an optional fast path: a Logic that implements it
// gets frames from its children through ReceiveChildFrame instead of as
// [ChildFrame] messages through Receive.
type ChildFrameReceiver interface {
	ReceiveChildFrame(c Context, child Ref, f *messages.Frame)
}

// Context is what a Logic can do. It is only valid inside the Receive (or
// OnFailure) call it was passed to.
type Context interface {
	// Emit pushes f to the duplex's subscriber (its source). Frames of one
	// stream arrive in the order they were emitted.
	Emit(f *messages.Frame)
	// Send writes f into the sink of another duplex.
	Send(to Ref, f *messages.Frame)
	// Spawn starts a child duplex. Unless spec.Subscriber is set, the
	// child's frames come back to this Logic as [ChildFrame] messages.
	// The child is supervised by this actor's strategy. A name is this
	// actor's until its child's [ChildStopped] has been received: a
	// Spawn under it before then fails with [ErrChildNameInUse].
	Spawn(spec Spec) (Ref, error)
	// Stop stops a child after the messages already queued to it. A
	// child that failed and whose restart has not happened yet is
	// stopped instead of restarted, when the restart comes (after its
	// backoff, if any): its Logic is not started again, and the calls
	// queued to it meanwhile are refused. A child restarted for a
	// sibling's failure (all-for-one) is restarted, and stops after
	// serving the messages queued before the stop; but while its restart
	// waits for children of its own to stop, it takes what is queued,
	// the stop included: the calls before the stop are refused as by a
	// stopping duplex (failure kind [StoppedKind]), and its Logic is not
	// started again.
	Stop(child Ref)
	// Go runs fn on its own goroutine. fn's context is cancelled when the
	// returned cancel function is called or this incarnation ends. Values
	// passed to progress arrive as [AsyncProgress] and fn's return value
	// as [AsyncDone], both carrying key; a panic in fn arrives as an
	// AsyncDone whose Err is a *[PanicError]. News from an ended
	// incarnation is dropped. Work keyed by the stream id (a string) of
	// the call it serves is that call's: when a supervisor's Resume
	// answers the call (see [FailedKind]), its context is cancelled
	// (not when the stream carries other calls, whose work it may be).
	Go(key any, fn func(ctx context.Context, progress func(any)) any) (cancel func())
	// After delivers a [Timer] carrying key after d. The returned function
	// stops the timer; it reports whether the timer was stopped before it
	// fired.
	After(d time.Duration, key any) (stop func() bool)
	// Fail ends this incarnation with err: the supervisor decides what
	// happens next (restart by default). Fail does not return.
	Fail(err error)
	// Self is this duplex.
	Self() Ref
	// Logger is the runtime's logger, with this actor's id.
	Logger() *slog.Logger
}

// Started is the first message of every incarnation of a Logic.
type Started struct{}

// ChildFrame is a frame emitted by a child of this actor.
type ChildFrame struct {
	Child Ref
	Frame *messages.Frame
}

// ChildStopped says a child has stopped for good.
type ChildStopped struct{ Child Ref }

// AsyncProgress is a value a Go function passed to its progress callback.
type AsyncProgress struct {
	Key   any
	Value any
}

// AsyncDone is the outcome of a Go function: its return value, or a
// *[PanicError] in Err when it panicked.
type AsyncDone struct {
	Key   any
	Value any
	Err   error
}

// Timer is a timer set with [Context.After] firing.
type Timer struct{ Key any }

// ResumeAnswered tells a Logic that its supervisor resumed it after a
// frame of one of its calls failed it, and that the runtime answered
// that call in its stead (see [FailedKind]): it emitted, on the Logic's
// behalf, an ERROR and an END on Stream, both with ToolCallID. Alone, the
// call of that id was answered alone among the calls of its stream, which
// stays open for the others; otherwise the stream was answered, each of
// its calls with it, and is closed (ToolCallID is then its sole call's,
// or empty). It comes before the CANCEL of the call the runtime delivers
// next, and what the Logic emits on the answered call from then on is
// dropped (see the package doc). A Logic that keeps its own record of
// the streams its duplex owes an END (a router telling the END of one of
// a stream's calls from the END of the stream) notes that END as one it
// emitted; the others may ignore it.
type ResumeAnswered struct {
	Stream     string
	ToolCallID string
	Alone      bool
}

// Spec describes a duplex to start. Its zero value is not usable: New is
// required.
type Spec struct {
	// Name names the actor under its parent. Started with [Runtime.Start]
	// or [Runtime.Spawn], a duplex whose name is taken gets a unique one
	// (the name with "-2", "-3", ... added), so any number of duplexes of
	// one spec can run in one runtime; a [Spec.Durable] duplex keeps its
	// name exactly (it is part of a persistence key), and starting it
	// while that name is taken fails with [ErrNameTaken]. Children of a
	// duplex must have names unique among their siblings.
	Name string
	// New makes the Logic for one incarnation. It is called again after
	// every restart, so state held in the Logic starts afresh.
	New func() Logic
	// Subscriber receives the duplex's frames; the zero Ref means the
	// actor that spawns it. A subscriber that is not the duplex's parent
	// gets them as plain messages, sent without a sender (an actor of
	// your own sees a nil ctx.Sender(): tell duplexes apart by stream id,
	// or give each its own subscriber).
	Subscriber Ref
	// Supervision supervises this actor's children; nil means the
	// runtime's default strategy.
	Supervision *supervisor.Strategy
	// Dispatcher schedules this actor's mailbox; nil means the runtime's.
	Dispatcher actor.Dispatcher
	// Persistence, when set, makes the duplex persistent under this
	// provider: see [Persister]. Persistent duplexes need a stable Name.
	Persistence persistence.Provider
	// Observe, when set, makes a [FrameObserver] for each incarnation of
	// the duplex (called as it starts, before its Logic gets Started): it
	// sees what the Logic receives and emits without standing between the
	// Logic and the runtime. Nil costs the duplex nothing but a branch per
	// message and per emitted frame.
	Observe func() FrameObserver

	// inner is set by Wrap, Pipe and Join when a duplex they own is
	// Durable: the persistence key of that duplex contains this name.
	innerDurable bool
}

// Durable reports whether the duplex, or one it owns (the inner of a
// [Wrap], a stage of a [Pipe], a member of a [Join]), is persistent. A
// durable duplex's name is part of a persistence key: the runtime never
// renames it.
func (s Spec) Durable() bool { return s.Persistence != nil || s.innerDurable }

// Ref names a running duplex. The zero Ref names nothing.
type Ref struct{ pid *actor.PID }

// RefOf wraps a protoactor PID.
func RefOf(pid *actor.PID) Ref { return Ref{pid: pid} }

// PID is the protoactor process id behind r, for code that drops down to
// protoactor.
func (r Ref) PID() *actor.PID { return r.pid }

// IsZero reports whether r names nothing.
func (r Ref) IsZero() bool { return r.pid == nil }

// Equal reports whether r and o name the same duplex.
func (r Ref) Equal(o Ref) bool {
	if r.pid == nil || o.pid == nil {
		return r.pid == o.pid
	}
	return r.pid.Equal(o.pid)
}

// String is the duplex's actor id.
func (r Ref) String() string { return r.pid.GetId() }

// PanicError is the failure a panic in a Logic or in a Go function turns
// into.
type PanicError struct {
	// Actor is the id of the actor the panic happened in.
	Actor string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic in %s: %v", e.Actor, e.Value) }

// Unwrap returns the panic value when it was an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

func newPanicError(actorID string, v any) *PanicError {
	return &PanicError{Actor: actorID, Value: v, Stack: debug.Stack()}
}
