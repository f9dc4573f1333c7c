package telemetry

import (
	"context"
	"log/slog"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// observer sees the frames of one incarnation of a tapped duplex: those
// written into its sink (in), those it emits (out, before they leave),
// and the end of the incarnation by a failure, a restart or a stop
// (failed: the streams still open are then closed by the runtime with
// ERROR and END, which out does not see).
type observer interface {
	in(c actors.Context, f *messages.Frame)
	out(f *messages.Frame)
	failed(c actors.Context, err error)
}

// tap returns spec with every incarnation's Logic run inside a tap: the
// duplex stays one actor with the same name, supervision and persistence,
// and its frames are observed in its own turn, without an actor hop.
func tap(spec actors.Spec, newObserver func() observer) actors.Spec {
	newLogic := spec.New
	spec.New = func() actors.Logic { return &tapLogic{inner: newLogic(), obs: newObserver()} }
	return spec
}

// tapLogic runs inner with itself as the Context, so that what inner
// emits passes through obs. It is the Context inner gets: every method
// but Emit delegates to the shell's Context of the current turn.
type tapLogic struct {
	inner actors.Logic
	obs   observer
	c     actors.Context // of the current turn
}

var (
	_ actors.Logic              = (*tapLogic)(nil)
	_ actors.Context            = (*tapLogic)(nil)
	_ actors.ChildFrameReceiver = (*tapLogic)(nil)
	_ actors.FailureHandler     = (*tapLogic)(nil)
)

// Receive implements actors.Logic.
func (t *tapLogic) Receive(c actors.Context, msg any) {
	t.c = c
	if f, ok := msg.(*messages.Frame); ok {
		t.obs.in(c, f)
	}
	t.inner.Receive(t, msg)
}

// ReceiveChildFrame implements actors.ChildFrameReceiver: a child's frame
// reaches inner as it would without the tap.
func (t *tapLogic) ReceiveChildFrame(c actors.Context, child actors.Ref, f *messages.Frame) {
	t.c = c
	if r, ok := t.inner.(actors.ChildFrameReceiver); ok {
		r.ReceiveChildFrame(t, child, f)
		return
	}
	t.inner.Receive(t, actors.ChildFrame{Child: child, Frame: f})
}

// OnFailure implements actors.FailureHandler.
func (t *tapLogic) OnFailure(c actors.Context, err error) {
	t.c = c
	if h, ok := t.inner.(actors.FailureHandler); ok {
		h.OnFailure(t, err)
	}
	t.obs.failed(c, err)
}

// Emit implements actors.Context.
func (t *tapLogic) Emit(f *messages.Frame) {
	t.obs.out(f)
	t.c.Emit(f)
}

// EmitPassed lets actors.EmitPassed see through the tap: a wrapper
// under it (a router keeping its own record of the streams it owes an
// END) learns which of its frames the runtime dropped.
func (t *tapLogic) EmitPassed(f *messages.Frame) bool {
	t.obs.out(f)
	return actors.EmitPassed(t.c, f)
}

// Send implements actors.Context.
func (t *tapLogic) Send(to actors.Ref, f *messages.Frame) { t.c.Send(to, f) }

// Spawn implements actors.Context.
func (t *tapLogic) Spawn(spec actors.Spec) (actors.Ref, error) { return t.c.Spawn(spec) }

// Stop implements actors.Context.
func (t *tapLogic) Stop(child actors.Ref) { t.c.Stop(child) }

// Go implements actors.Context.
func (t *tapLogic) Go(key any, fn func(ctx context.Context, progress func(any)) any) func() {
	return t.c.Go(key, fn)
}

// After implements actors.Context.
func (t *tapLogic) After(d time.Duration, key any) func() bool { return t.c.After(d, key) }

// Fail implements actors.Context.
func (t *tapLogic) Fail(err error) { t.c.Fail(err) }

// Self implements actors.Context.
func (t *tapLogic) Self() actors.Ref { return t.c.Self() }

// Logger implements actors.Context.
func (t *tapLogic) Logger() *slog.Logger { return t.c.Logger() }

// Persister lets actors.PersisterOf see through the tap.
func (t *tapLogic) Persister() (actors.Persister, bool) { return actors.PersisterOf(t.c) }
