package actors

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// failingChild is a duplex that counts its Logic's starts, fails
// ("boom") on a TEXT "fail" and answers any other TEXT with TEXT
// "served" and END. With child set it spawns child as it starts and
// writes it a frame.
func failingChild(starts *atomic.Int32, child *Spec) Spec {
	return Spec{Name: "d", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				starts.Add(1)
				if child != nil {
					ref, err := c.Spawn(*child)
					if err != nil {
						c.Fail(err)
					}
					c.Send(ref, messages.Text("k", "hold"))
				}
			case *messages.Frame:
				if m.GetType() != messages.FrameType_TEXT {
					return
				}
				if m.GetText() == "fail" {
					c.Fail(errors.New("boom"))
				}
				c.Emit(messages.Text(m.GetStreamId(), "served"))
				c.Emit(messages.End(m.GetStreamId()))
			}
		})
	}}
}

// stopsFailedChild is the spec of a duplex "p" that spawns spec at start
// and, on a frame written into it, writes its child a call that fails
// it, stops it and then writes it the frames of late, all in one turn:
// the stop is queued at the child before its supervisor (this actor,
// after the turn) decides to restart it. What it gets from the child,
// and the child's stop ("STOPPED"), go to got.
func stopsFailedChild(spec Spec, late []*messages.Frame, got chan<- string) Spec {
	return Spec{Name: "p", New: func() Logic {
		var d Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				var err error
				if d, err = c.Spawn(spec); err != nil {
					c.Fail(err)
				}
			case *messages.Frame:
				c.Send(d, messages.Text("f", "fail"))
				c.Stop(d)
				for _, f := range late {
					c.Send(d, f)
				}
			case ChildFrame:
				name := m.Frame.GetStreamId() + ":" + frameName(m.Frame)
				if k := m.Frame.GetMeta().GetFailureKind(); k != "" {
					name += "[" + k + "]"
				}
				got <- name
			case ChildStopped:
				got <- "STOPPED"
			}
		})
	}}
}

// TestShell_StopBeforeRestartWins: a duplex stopped by its parent
// (Context.Stop) after it failed and before its supervisor's restart
// reaches it stops, and is not restarted first: its Logic starts once,
// its failed call is answered once with the failure, and its parent
// gets its ChildStopped.
func TestShell_StopBeforeRestartWins(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, nil)
	var starts atomic.Int32
	got := make(chan string, 16)
	ref, err := rt.Spawn(stopsFailedChild(failingChild(&starts, nil), nil, got))
	if err != nil {
		t.Fatal(err)
	}
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "STOPPED" {
		select {
		case s := <-got:
			seen = append(seen, s)
		case <-ctx.Done():
			t.Fatalf("the parent got %q and then nothing", seen)
		}
	}
	if want := []string{"f:ERROR(boom)", "f:END", "STOPPED"}; !slices.Equal(seen, want) {
		t.Errorf("the parent got %q, want %q", seen, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the child's Logic was started %d times, want 1: a stop that came before the restart did not win", n)
	}
}
