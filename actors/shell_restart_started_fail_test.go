package actors

import (
	"errors"
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
