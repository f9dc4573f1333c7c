package actors

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here resume (or restart) a failed duplex: the call that
// failed it gets one answer, the Resume's (ERROR of kind FailedKind, and
// END), and the duplex goes on.

// decidingAll is a strategy that decides d for every failed duplex.
func decidingAll(d supervisor.Directive) *supervisor.Strategy {
	return supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { return d }})
}

// resumeAll is a strategy that resumes every failed duplex.
func resumeAll() *supervisor.Strategy { return decidingAll(supervisor.Resume) }

// recvUntil reads conn until a frame named last arrives on stream, and
// returns the frames read as frameLabel records them.
func recvUntil(t *testing.T, conn *Conn, stream, last string) []string {
	t.Helper()
	return recvLabeled(t, conn, stream+":"+last, frameLabel)
}

// recvLabeled reads conn until a frame label records as last arrives,
// and returns the frames read as label records them.
func recvLabeled(t *testing.T, conn *Conn, last string, label func(*messages.Frame) string) []string {
	t.Helper()
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1] != last {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v after %q", err, got)
		}
		got = append(got, label(f))
	}
	return got
}

// onStream returns the records of got that are of stream.
func onStream(got []string, stream string) []string {
	var on []string
	for _, g := range got {
		if strings.HasPrefix(g, stream+":") {
			on = append(on, g)
		}
	}
	return on
}

// textDuplex is a duplex "d" whose Logic hands each TEXT frame to receive.
func textDuplex(receive func(c Context, f *messages.Frame)) Spec {
	return frameDuplex(func(c Context, f *messages.Frame) {
		if f.GetType() == messages.FrameType_TEXT {
			receive(c, f)
		}
	})
}

// frameDuplex is a duplex "d" whose Logic hands each frame to receive.
func frameDuplex(receive func(c Context, f *messages.Frame)) Spec {
	return Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok {
				receive(c, f)
			}
		})
	}}
}

// sendResumed writes frames into a failingChild whose supervisor resumes
// it, and returns what it answered up to the END of stream g.
func sendResumed(t *testing.T, starts *atomic.Int32, frames ...*messages.Frame) []string {
	t.Helper()
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(failingChild(starts, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(frames...); err != nil {
		t.Fatal(err)
	}
	return recvUntil(t, conn, "g", "END")
}

// TestShell_ResumeAnswersTheFailedCall: a duplex whose supervisor
// resumes it after a call failed it. The failed call gets its one answer
// (failures are answers), an ERROR of kind FailedKind with the failure's
// text and END, before the call written after it is served; the duplex
// goes on with the Logic it had.
func TestShell_ResumeAnswersTheFailedCall(t *testing.T) {
	var starts atomic.Int32
	got := sendResumed(t, &starts, messages.Text("f", "fail"), messages.Text("g", "other"))
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "g:TEXT(served)", "g:END"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q: the failed call answered before the next is served", got, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the Logic was started %d times, want 1 (resumed, not restarted)", n)
	}
}

// resumedLateEmit runs a duplex that fails on TEXT "fail" (or on the END of a
// stream named "e"), remembers that stream, and on TEXT "flush" emits a
// late answer on it; sends, then checks that the failed stream got
// exactly one answer, the Resume's.
func resumedLateEmit(t *testing.T, sends []*messages.Frame, failed string) {
	t.Helper()
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		var pending string
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok {
				return
			}
			if f.GetType() == messages.FrameType_END && f.GetStreamId() == "e" {
				pending = "e"
				c.Fail(errors.New("boom"))
			}
			if f.GetType() != messages.FrameType_TEXT {
				return
			}
			switch f.GetText() {
			case "fail":
				pending = f.GetStreamId()
				c.Fail(errors.New("boom"))
			case "flush":
				c.Emit(messages.Text(pending, "late"))
				c.Emit(messages.End(pending))
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(sends...); err != nil {
		t.Fatal(err)
	}
	on := onStream(recvUntil(t, conn, "g", "END"), failed)
	if want := []string{failed + ":ERROR(boom)[" + FailedKind + "]", failed + ":END"}; !slices.Equal(on, want) {
		t.Errorf("stream %s got %q, want exactly one answer %q", failed, on, want)
	}
}

// TestShell_ResumedLogicCannotAnswerFailedCallAgain: a resumed Logic keeps
// its state, the failed call's stream among it, and emits an answer on it
// later. The Resume answered that call (ERROR of kind FailedKind, END):
// the Logic's answer is dropped, the call gets one answer.
func TestShell_ResumedLogicCannotAnswerFailedCallAgain(t *testing.T) {
	resumedLateEmit(t, []*messages.Frame{messages.Text("f", "fail"), messages.Text("g", "flush")}, "f")
}

// TestShell_ResumedLogicLateEmitAfterCallersEnd: the caller ends the failed
// call (END) before the resumed Logic emits its late answer on it: the
// Resume answered the call, the Logic's answer is dropped.
func TestShell_ResumedLogicLateEmitAfterCallersEnd(t *testing.T) {
	resumedLateEmit(t, []*messages.Frame{
		messages.Text("f", "fail"), messages.End("f"), messages.Text("g", "flush"),
	}, "f")
}

// TestShell_ResumedLogicLateEmitWhenEndFailed: the frame that fails the
// duplex is the caller's END itself; the Logic's late answer is dropped.
func TestShell_ResumedLogicLateEmitWhenEndFailed(t *testing.T) {
	resumedLateEmit(t, []*messages.Frame{
		messages.Text("e", "work"), messages.End("e"), messages.Text("g", "flush"),
	}, "e")
}

// TestShell_ResumeDropsRestOfFailedCall: a call is the frames of its
// stream up to the caller's END. The Resume answers the call whose frame
// failed the duplex; the call's later frames, up to its END, are the
// answered call's: dropped, not a new call for the Logic to answer again.
func TestShell_ResumeDropsRestOfFailedCall(t *testing.T) {
	var starts atomic.Int32
	onF := onStream(sendResumed(t, &starts, messages.Text("f", "fail"), messages.Text("f", "more"), messages.End("f"), messages.Text("g", "other")), "f")
	if want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END"}; !slices.Equal(onF, want) {
		t.Errorf("stream f got %q, want one answer %q", onF, want)
	}
}

// TestShell_ResumedCallEndsAtCallersEnd: a call is the frames of its
// stream up to the caller's END, as for calls an incarnation's end closed
// (see shell.late). A caller that gets the Resume's answer (ERROR, END)
// and sends more on the stream before its END sends the answered call's
// rest: dropped, no second answer. A call opened after the caller's END
// is a new call, which the Logic answers, though it never ended the
// failed call itself.
func TestShell_ResumedCallEndsAtCallersEnd(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(textDuplex(func(c Context, f *messages.Frame) {
		if f.GetText() == "fail" {
			c.Fail(errors.New("boom"))
		}
		c.Emit(messages.Text(f.GetStreamId(), "echo:"+f.GetText()))
		c.Emit(messages.End(f.GetStreamId()))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("f", "fail")); err != nil {
		t.Fatal(err)
	}
	got := recvUntil(t, conn, "f", "END")
	if err := conn.SendAll(
		messages.Text("f", "again"), messages.End("f"), // the answered call's rest
		messages.Text("f", "new"), messages.End("f"), // a new call
		messages.Text("g", "probe"), messages.End("g"),
	); err != nil {
		t.Fatal(err)
	}
	got = append(got, recvUntil(t, conn, "g", "END")...)
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "f:TEXT(echo:new)", "f:END"}
	if onF := onStream(got, "f"); !slices.Equal(onF, want) {
		t.Errorf("stream f got %q, want %q", onF, want)
	}
}

// TestShell_StopAfterResumeIsAStop: a duplex resumed after a failure goes
// on; stopped later, it closes a call still open as a stopped duplex
// does (ERROR of kind StoppedKind saying so): the failure it was resumed
// from is over, not the reason it ends.
func TestShell_StopAfterResumeIsAStop(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(textDuplex(func(c Context, f *messages.Frame) {
		switch f.GetText() {
		case "hold": // the call stays open
		case "fail":
			c.Fail(errors.New("boom"))
		default:
			c.Emit(messages.End(f.GetStreamId()))
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.Text("h", "hold"), messages.Text("f", "fail"), messages.Text("g", "ping")); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, conn, "g", "END") // resumed
	if err := conn.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	got := recvUntil(t, conn, "h", "END")
	if want := []string{"h:ERROR(" + ErrStopped.Error() + ")[" + StoppedKind + "]", "h:END"}; !slices.Equal(got, want) {
		t.Errorf("the call open at the stop got %q, want %q", got, want)
	}
}

// TestShell_ResumedParentResumesEscalatedChild: p escalates its child
// c's failure, and p's supervisor resumes p. c, suspended for its
// failure, is resumed with p: the call that failed it is answered (ERROR
// of kind FailedKind, and END), a call written to it afterwards is
// served, and p's Context.Stop of c stops it (p gets ChildStopped). c's
// Logic was started once: resumed, not restarted.
func TestShell_ResumedParentResumesEscalatedChild(t *testing.T) {
	resumed := make(chan struct{}, 1)
	rt := startRuntimeWith(t, &RuntimeOptions{
		Supervision: resumeAll(),
		OnSupervision: func(ev supervisor.Event) {
			if ev.Directive == supervisor.Resume && strings.HasSuffix(ev.Child, "/p") {
				resumed <- struct{}{}
			}
		},
	})
	var starts atomic.Int32
	cSpec := failingChild(&starts, nil)
	cSpec.Name = "c"
	got := make(chan string, 16)
	p := parentOf(cSpec, got, func(ctx Context, c Ref, f *messages.Frame) {
		switch f.GetText() {
		case "go":
			ctx.Send(c, messages.Text("f", "fail"))
		case "call":
			ctx.Send(c, messages.Text("n", "call"))
		case "stop":
			ctx.Stop(c)
		}
	})
	p.Supervision = decidingAll(supervisor.Escalate)
	ref, err := rt.Spawn(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	rt.Send(ref, messages.Text("s", "go"))
	waitFor(t, ctx, resumed, "p was never resumed")
	rt.Send(ref, messages.Text("s", "call"))
	rt.Send(ref, messages.Text("s", "stop"))
	seen := untilStopped(t, ctx, got, nil)
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "n:TEXT(served)", "n:END", "STOPPED"}
	if !slices.Equal(seen, want) {
		t.Errorf("p got from c %q, want %q", seen, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("c's Logic was started %d times, want 1 (resumed)", n)
	}
}

// startFailer fails its 2nd incarnation in Started, and any call whose
// text is "fail"; OnFailure reports each reason.
type startFailer struct {
	starts  *atomic.Int32
	reasons chan<- string
}

func (l *startFailer) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		if l.starts.Add(1) == 2 {
			c.Fail(errors.New("start-boom"))
		}
	case *messages.Frame:
		if m.GetText() == "fail" {
			c.Fail(errors.New("boom"))
		}
		c.Emit(messages.Text(m.GetStreamId(), "served"))
		c.Emit(messages.End(m.GetStreamId()))
	}
}

func (l *startFailer) OnFailure(_ Context, err error) { l.reasons <- err.Error() }

// TestShell_StartedFailureReasonAfterRestart: the 2nd incarnation fails in
// Started, before the Resume protoactor queues as its restart completes
// is taken: its OnFailure gets its own failure ("start-boom"), not
// "restarted".
func TestShell_StartedFailureReasonAfterRestart(t *testing.T) {
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: decidingAll(supervisor.Restart)})
	var starts atomic.Int32
	reasons := make(chan string, 8)
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic { return &startFailer{starts: &starts, reasons: reasons} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.Text("f", "fail"), messages.Text("g", "x")); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, conn, "g", "END")
	r1, r2 := <-reasons, <-reasons
	if r1 != "boom" || r2 != "start-boom" {
		t.Errorf("OnFailure reasons %q, %q; want boom, start-boom", r1, r2)
	}
}
