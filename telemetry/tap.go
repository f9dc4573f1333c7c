package telemetry

import (
	"context"
	"log/slog"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// observer sees the frames of one incarnation of a tapped duplex: those
// written into its sink (in), those it emits that go out (out, before
// they leave, but for a frame on a call a Resume answered: see
// tapLogic.Emit), the calls a supervisor's Resume answered (resumed: the
// runtime closed them with ERROR and END, which out does not see; err is
// the failure when the tap saw it, nil for a panic), and the end of the
// incarnation by a failure, a restart or a stop (failed: the streams
// still open are then closed by the runtime, likewise unseen).
type observer interface {
	in(c actors.Context, f *messages.Frame)
	out(f *messages.Frame)
	resumed(a actors.ResumeAnswered, err error)
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
	// failure is the error inner failed its turn with (Fail), until the
	// next message: the failure a Resume that follows answers a call for.
	failure error
	// answered are the calls a Resume answered whose END inner has not
	// emitted yet: the runtime drops inner's frames on them. A stream's
	// (call empty) maps to its sole call's id, or "".
	answered map[answeredCall]string
}

// answeredCall is a call a Resume answered: a stream's, or, call set,
// one call answered alone among its stream's.
type answeredCall struct{ stream, call string }

var (
	_ actors.Logic              = (*tapLogic)(nil)
	_ actors.Context            = (*tapLogic)(nil)
	_ actors.ChildFrameReceiver = (*tapLogic)(nil)
	_ actors.FailureHandler     = (*tapLogic)(nil)
)

// Receive implements actors.Logic.
func (t *tapLogic) Receive(c actors.Context, msg any) {
	t.c = c
	failure := t.failure
	t.failure = nil
	switch m := msg.(type) {
	case *messages.Frame:
		t.obs.in(c, m)
	case actors.ResumeAnswered:
		t.resumed(m, failure)
	}
	t.inner.Receive(t, msg)
}

// resumed closes for obs the call a Resume answered, as the runtime did,
// and notes it: inner's frames on it, which the runtime drops, are
// observed only if they go out (see Emit).
func (t *tapLogic) resumed(a actors.ResumeAnswered, failure error) {
	t.obs.resumed(a, failure)
	if t.answered == nil {
		t.answered = map[answeredCall]string{}
	}
	if a.Alone {
		t.answered[answeredCall{a.Stream, a.ToolCallID}] = a.ToolCallID
	} else {
		t.answered[answeredCall{a.Stream, ""}] = a.ToolCallID
	}
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

// Emit implements actors.Context. A frame is observed before it leaves,
// so that whoever gets it finds it recorded after a Flush; but one on a
// call a Resume answered, which the runtime drops until inner's END of
// it, is observed after it was emitted, only if it went out: the call
// has its answer, the runtime's.
func (t *tapLogic) Emit(f *messages.Frame) {
	if len(t.answered) == 0 {
		t.obs.out(f)
		t.c.Emit(f)
		return
	}
	t.emitChecked(f)
}

// EmitPassed lets actors.EmitPassed see through the tap: a wrapper
// under it (a router keeping its own record of the streams it owes an
// END) learns which of its frames the runtime dropped.
func (t *tapLogic) EmitPassed(f *messages.Frame) bool {
	if len(t.answered) == 0 {
		t.obs.out(f)
		return actors.EmitPassed(t.c, f)
	}
	return t.emitChecked(f)
}

// emitChecked emits f, observing it if it went out, with calls a Resume
// answered (see Emit), and forgets the call inner's END ends.
func (t *tapLogic) emitChecked(f *messages.Frame) bool {
	k, on := t.answeredOf(f)
	if !on {
		t.obs.out(f)
		return actors.EmitPassed(t.c, f)
	}
	passed := actors.EmitPassed(t.c, f)
	if passed {
		t.obs.out(f)
	}
	if f.GetType() == messages.FrameType_END {
		t.ended(k, f)
	}
	return passed
}

// answeredOf returns the call a Resume answered that f is on, if any.
func (t *tapLogic) answeredOf(f *messages.Frame) (answeredCall, bool) {
	k := answeredCall{f.GetStreamId(), ""}
	if _, ok := t.answered[k]; ok {
		return k, true
	}
	if c := f.GetToolCallId(); c != "" {
		k.call = c
		if _, ok := t.answered[k]; ok {
			return k, true
		}
	} else if f.GetType() == messages.FrameType_END {
		for a := range t.answered { // the END of a stream ends its calls
			if a.stream == k.stream {
				return a, true
			}
		}
	}
	return k, false
}

// ended forgets the calls inner's END f, on the answered call k, ends:
// the stream's with its END (or with its sole call's when it carried
// one), a call answered alone with the END of that call or of its
// stream (which ends all of them).
func (t *tapLogic) ended(k answeredCall, f *messages.Frame) {
	c := f.GetToolCallId()
	switch {
	case k.call == "":
		if c == "" || c == t.answered[k] {
			delete(t.answered, k)
		}
	case c != "":
		delete(t.answered, k)
	default:
		for a := range t.answered {
			if a.stream == k.stream {
				delete(t.answered, a)
			}
		}
	}
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
func (t *tapLogic) Fail(err error) {
	t.failure = err
	t.c.Fail(err)
}

// Self implements actors.Context.
func (t *tapLogic) Self() actors.Ref { return t.c.Self() }

// Logger implements actors.Context.
func (t *tapLogic) Logger() *slog.Logger { return t.c.Logger() }

// Persister lets actors.PersisterOf see through the tap.
func (t *tapLogic) Persister() (actors.Persister, bool) { return actors.PersisterOf(t.c) }
