package actors

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_ResumedParentResumesEscalatedChild: p escalates its child
// c's failure, and p's supervisor resumes p. c, suspended for its
// failure, is resumed with p: the call that failed it is answered (ERROR
// of kind FailedKind, and END), a call written to it afterwards is
// served, and p's Context.Stop of c stops it (p gets ChildStopped). c's
// Logic was started once: resumed, not restarted.
func TestShell_ResumedParentResumesEscalatedChild(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	resumed := make(chan struct{}, 1)
	rt := closedRuntime(t, &RuntimeOptions{
		Supervision: supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Resume }}),
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
	p := Spec{Name: "p", Supervision: supervisor.MustNew(&supervisor.Options{Decider: func(error) supervisor.Directive { return supervisor.Escalate }}), New: func() Logic {
		var c Ref
		return LogicFunc(func(ctx Context, msg any) {
			switch m := msg.(type) {
			case Started:
				var err error
				if c, err = ctx.Spawn(cSpec); err != nil {
					ctx.Fail(err)
				}
			case *messages.Frame:
				switch m.GetText() {
				case "go":
					ctx.Send(c, messages.Text("f", "fail"))
				case "call":
					ctx.Send(c, messages.Text("n", "call"))
				case "stop":
					ctx.Stop(c)
				}
			case ChildFrame:
				got <- m.Frame.GetStreamId() + ":" + frameName(m.Frame) + "[" + m.Frame.GetMeta().GetFailureKind() + "]"
			case ChildStopped:
				got <- "STOPPED"
			}
		})
	}}
	ref, err := rt.Spawn(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	rt.Send(ref, messages.Text("s", "go"))
	select {
	case <-resumed:
	case <-ctx.Done():
		t.Fatal("p was never resumed")
	}
	rt.Send(ref, messages.Text("s", "call"))
	rt.Send(ref, messages.Text("s", "stop"))
	seen := untilStopped(t, ctx, got, nil)
	want := []string{"f:ERROR(boom)[" + FailedKind + "]", "f:END[]", "n:TEXT(served)[]", "n:END[]", "STOPPED"}
	if !slices.Equal(seen, want) {
		t.Errorf("p got from c %q, want %q", seen, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("c's Logic was started %d times, want 1 (resumed)", n)
	}
}
