package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/polyweave/polyweave-go/messages"
)

// Wrapped is the logic of a bidirectional wrapper: it sees every frame
// going into the inner duplex it owns (Request) and every frame coming out
// of it (Response). Calling neither method of the [WrapperContext] drops
// the frame; calling one passes or replaces it; calling several multiplies
// it. A response hook that calls ToInner writes back into the inner
// duplex's sink: that is how routers return TOOL_RESULT frames.
//
// A Wrapped may also implement [MessageHandler] (for AsyncDone, Timer and
// other messages) and [WrapperFailureHandler].
type Wrapped interface {
	Request(c WrapperContext, f *messages.Frame)
	Response(c WrapperContext, f *messages.Frame)
}

// MessageHandler receives the messages a wrapper gets that are not frames:
// [AsyncProgress], [AsyncDone], [Timer], [ChildFrame] from children other
// than the inner duplex, [ChildStopped], [ResumeAnswered], and user
// messages.
type MessageHandler interface {
	HandleMessage(c WrapperContext, msg any)
}

// WrapperFailureHandler is the wrapper's [FailureHandler].
type WrapperFailureHandler interface {
	OnFailure(c WrapperContext, err error)
}

// WrapperStarter is implemented by a Wrapped that wants to act once its
// inner duplex is running, at the start of every incarnation.
type WrapperStarter interface {
	Start(c WrapperContext)
}

// WrapperContext is the [Context] of a wrapper plus its two directions.
type WrapperContext interface {
	Context
	// ToInner writes f into the inner duplex's sink.
	ToInner(f *messages.Frame)
	// ToOuter emits f from the wrapper's source (same as Emit).
	ToOuter(f *messages.Frame)
	// ToOuterPassed is ToOuter, and reports whether f went out: false
	// when the runtime dropped it (a frame on a call it answered itself,
	// the second END of a call: see the package doc)
	// or the duplex's [FrameObserver] kept it. Only a frame that went out
	// opens or ends a stream, or one of its calls, for the runtime: a
	// Wrapped that keeps its own record of them (a router telling the
	// END of one call from the END of a stream) notes that frame alone,
	// and the END of a [ResumeAnswered]. Under a Context that decorates
	// the runtime's it reports what the runtime did when the decorator
	// passes frames on with [EmitPassed]; under any other Context that is
	// not the runtime's own (a Recorder, say), true.
	ToOuterPassed(f *messages.Frame) bool
	// Inner is the inner duplex.
	Inner() Ref
}

// Hooks is a [Wrapped] made of functions; a nil hook passes frames
// unchanged.
type Hooks struct {
	OnRequest  func(c WrapperContext, f *messages.Frame)
	OnResponse func(c WrapperContext, f *messages.Frame)
}

// Request implements Wrapped.
func (h Hooks) Request(c WrapperContext, f *messages.Frame) {
	if h.OnRequest == nil {
		c.ToInner(f)
		return
	}
	h.OnRequest(c, f)
}

// Response implements Wrapped.
func (h Hooks) Response(c WrapperContext, f *messages.Frame) {
	if h.OnResponse == nil {
		c.ToOuter(f)
		return
	}
	h.OnResponse(c, f)
}

// Wrap returns the spec of a bidirectional wrapper named name that owns
// inner as its child. newWrapped makes the wrapper logic for each
// incarnation. When the wrapper restarts, its inner duplex restarts with
// it.
func Wrap(name string, inner Spec, newWrapped func() Wrapped) Spec {
	return Spec{Name: name, New: func() Logic { return NewWrapperLogic(inner, newWrapped()) }, innerDurable: inner.Durable()}
}

// WrapperLogic is the Logic of a wrapper. It is exported so that tests can
// drive a wrapper step by step with a recording Context, without an actor
// system.
type WrapperLogic struct {
	innerSpec Spec
	w         Wrapped
	inner     Ref
	c         Context
}

// NewWrapperLogic returns the Logic of a wrapper around inner.
func NewWrapperLogic(inner Spec, w Wrapped) *WrapperLogic {
	inner.Subscriber = Ref{} // the wrapper must see the inner's frames
	return &WrapperLogic{innerSpec: inner, w: w}
}

// Receive implements Logic.
func (l *WrapperLogic) Receive(c Context, msg any) {
	l.c = c
	switch m := msg.(type) {
	case *messages.Frame:
		l.w.Request(l, m)
	case ChildFrame:
		if m.Child.Equal(l.inner) {
			l.w.Response(l, m.Frame)
			return
		}
		l.other(m)
	case Started:
		inner, err := c.Spawn(l.innerSpec)
		if err != nil {
			c.Fail(err)
		}
		l.inner = inner
		if s, ok := l.w.(WrapperStarter); ok {
			s.Start(l)
		}
	case ChildStopped:
		l.other(m)
		if m.Child.Equal(l.inner) {
			// The inner duplex is gone for good (its supervisor stopped
			// it): a wrapper without it cannot answer, so it fails too.
			c.Fail(&InnerStoppedError{Inner: m.Child.String()})
		}
	default:
		l.other(m)
	}
}

// ReceiveChildFrame implements ChildFrameReceiver.
func (l *WrapperLogic) ReceiveChildFrame(c Context, child Ref, f *messages.Frame) {
	l.c = c
	if child.Equal(l.inner) {
		l.w.Response(l, f)
		return
	}
	l.other(ChildFrame{Child: child, Frame: f})
}

func (l *WrapperLogic) other(msg any) {
	if h, ok := l.w.(MessageHandler); ok {
		h.HandleMessage(l, msg)
	}
}

// OnFailure implements FailureHandler.
func (l *WrapperLogic) OnFailure(c Context, err error) {
	l.c = c
	if h, ok := l.w.(WrapperFailureHandler); ok {
		h.OnFailure(l, err)
	}
}

// Wrapped returns the wrapper logic (for tests).
func (l *WrapperLogic) Wrapped() Wrapped { return l.w }

// ToInner implements WrapperContext.
func (l *WrapperLogic) ToInner(f *messages.Frame) { l.c.Send(l.inner, f) }

// ToOuter implements WrapperContext.
func (l *WrapperLogic) ToOuter(f *messages.Frame) { l.c.Emit(f) }

// ToOuterPassed implements WrapperContext.
func (l *WrapperLogic) ToOuterPassed(f *messages.Frame) bool {
	if s, ok := l.c.(*shell); ok {
		return s.emitPassed(f)
	}
	return EmitPassed(l.c, f)
}

// EmitPassed emits f with c, and reports whether f went out, as
// [WrapperContext].ToOuterPassed does. It sees through a wrapper's
// WrapperContext and through a Context that decorates the runtime's (a
// telemetry tap, say) when that Context implements
// EmitPassed(*messages.Frame) bool: one that passes the frame on to the
// Context it decorates does so with EmitPassed, so that what the runtime
// dropped is known to the Logic it decorates. Under any other Context it
// emits f and reports true.
func EmitPassed(c Context, f *messages.Frame) bool {
	for {
		switch x := c.(type) {
		case *shell:
			return x.emitPassed(f)
		case *WrapperLogic:
			c = x.c
		case interface{ EmitPassed(*messages.Frame) bool }:
			return x.EmitPassed(f)
		default:
			c.Emit(f)
			return true
		}
	}
}

// Inner implements WrapperContext.
func (l *WrapperLogic) Inner() Ref { return l.inner }

// The rest of WrapperContext delegates to the current Context.

// Emit implements Context.
func (l *WrapperLogic) Emit(f *messages.Frame) { l.c.Emit(f) }

// Send implements Context.
func (l *WrapperLogic) Send(to Ref, f *messages.Frame) { l.c.Send(to, f) }

// Spawn implements Context.
func (l *WrapperLogic) Spawn(spec Spec) (Ref, error) { return l.c.Spawn(spec) }

// Stop implements Context.
func (l *WrapperLogic) Stop(child Ref) { l.c.Stop(child) }

// Fail implements Context.
func (l *WrapperLogic) Fail(err error) { l.c.Fail(err) }

// Self implements Context.
func (l *WrapperLogic) Self() Ref { return l.c.Self() }

// Logger implements Context.
func (l *WrapperLogic) Logger() *slog.Logger { return l.c.Logger() }

// After implements Context.
func (l *WrapperLogic) After(d time.Duration, key any) func() bool { return l.c.After(d, key) }

// Go implements Context.
func (l *WrapperLogic) Go(key any, fn func(ctx context.Context, progress func(any)) any) func() {
	return l.c.Go(key, fn)
}

// InnerStoppedError is the failure of a wrapper whose inner duplex was
// stopped by its supervisor.
type InnerStoppedError struct{ Inner string }

func (e *InnerStoppedError) Error() string { return "inner duplex " + e.Inner + " stopped" }
