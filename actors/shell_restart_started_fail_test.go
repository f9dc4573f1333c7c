package actors

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

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
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Restart }})})
	var starts atomic.Int32
	reasons := make(chan string, 8)
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic { return &startFailer{starts: &starts, reasons: reasons} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("f", "fail")); err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("g", "x")); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, conn, "g", "END")
	r1, r2 := <-reasons, <-reasons
	if r1 != "boom" || r2 != "start-boom" {
		t.Errorf("OnFailure reasons %q, %q; want boom, start-boom", r1, r2)
	}
}

// TestShell_StopAfterResumeIsAStop: a duplex resumed after a failure goes
// on; stopped later, it closes a call still open as a stopped duplex
// does (ERROR of kind StoppedKind saying so): the failure it was resumed
// from is over, not the reason it ends.
func TestShell_StopAfterResumeIsAStop(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: resumeAll()})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			f, ok := msg.(*messages.Frame)
			if !ok || f.GetType() != messages.FrameType_TEXT {
				return
			}
			switch f.GetText() {
			case "hold": // the call stays open
			case "fail":
				c.Fail(errors.New("boom"))
			default:
				c.Emit(messages.End(f.GetStreamId()))
			}
		})
	}})
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
