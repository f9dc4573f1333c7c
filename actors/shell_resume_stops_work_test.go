package actors

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// ownKey is a job key of a Logic's own, no stream id.
type ownKey struct{}

// TestResumeAnsweredCall_StopsItsWork: a Logic starts background work
// (Context.Go) for the call on stream f, then fails on the call's next
// frame; its supervisor resumes it. The Resume answers f (ERROR of kind
// FailedKind, END) and from then on drops what the Logic emits on f: the
// call is over for its caller, and so is its work ("timeouts stop the
// work"). Work keyed by the stream's id has its context cancelled; the
// Logic gets a CANCEL of f, as from the caller, so that it stops work it
// keyed otherwise (what it emits on f in answer is dropped). It was told
// nothing, and the work ran on, its output dropped, until the
// incarnation's end.
func TestResumeAnsweredCall_StopsItsWork(t *testing.T) {
	for _, tc := range []struct {
		name     string
		byStream bool // keyed by the stream id, else by ownKey and stopped on CANCEL
	}{{"keyed by the stream", true}, {"stopped on CANCEL", false}} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
			rt := closedRuntime(t, &RuntimeOptions{Supervision: resumeAll()})
			jobStarted := make(chan struct{})
			jobStopped := make(chan struct{})
			conn, err := rt.Start(Spec{Name: "d", New: func() Logic {
				var stop func()
				return LogicFunc(func(c Context, msg any) {
					f, ok := msg.(*messages.Frame)
					if !ok {
						return
					}
					id := f.GetStreamId()
					if f.GetType() == messages.FrameType_CANCEL && !tc.byStream && stop != nil {
						stop()
						c.Emit(messages.Error(id, "cancelled"))
						c.Emit(messages.End(id))
						return
					}
					switch f.GetText() {
					case "work":
						var key any = ownKey{}
						if tc.byStream {
							key = id
						}
						stop = c.Go(key, func(ctx context.Context, _ func(any)) any {
							close(jobStarted)
							<-ctx.Done()
							close(jobStopped)
							return nil
						})
					case "fail":
						c.Fail(errors.New("boom"))
					case "ping":
						c.Emit(messages.Text(id, "pong"))
						c.Emit(messages.End(id))
					}
				})
			}})
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Send(messages.Text("f", "work")); err != nil {
				t.Fatal(err)
			}
			<-jobStarted
			if err := conn.SendAll(messages.Text("f", "fail"), messages.Text("g", "ping")); err != nil {
				t.Fatal(err)
			}
			got := recvUntil(t, conn, "g", "END")
			if want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END", "g:TEXT(pong)", "g:END"}; !slices.Equal(got, want) {
				t.Errorf("got %q, want %q (one answer to f, the Resume's)", got, want)
			}
			select {
			case <-jobStopped:
			case <-testContext(t).Done():
				t.Errorf("the work of call f still runs after the Resume answered f (its output is dropped); want it stopped")
			}
		})
	}
}
