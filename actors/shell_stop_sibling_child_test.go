package actors

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_StopOfHealthySiblingRestartingForItsChild is
// TestShell_StopOfHealthySiblingAfterQueuedCalls with b holding a child
// k that is slow to stop: b's restart for its sibling's failure waits
// for k, and b takes what is queued meanwhile, its stop included. The
// call written before the stop is refused as by a stopping duplex (with
// StoppedKind: b does not come back), once, and b's Logic is not started
// again.
func TestShell_StopOfHealthySiblingRestartingForItsChild(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, nil)
	var bStarts, aStarts atomic.Int32
	k, kEntered, releaseK := holdingChild(t)
	busy, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	aRestarted := make(chan struct{})
	bSpec := Spec{Name: "b", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				if bStarts.Add(1) == 1 {
					ref, err := c.Spawn(k)
					if err != nil {
						c.Fail(err)
					}
					c.Send(ref, messages.Text("k", "hold"))
				}
			case *messages.Frame:
				switch {
				case m.GetType() != messages.FrameType_TEXT:
				case m.GetText() == "hold":
					close(busy)
					<-release
				default:
					c.Emit(messages.Text(m.GetStreamId(), "served"))
					c.Emit(messages.End(m.GetStreamId()))
				}
			}
		})
	}}
	aSpec := failingChild(&aStarts, nil)
	aSpec.Name = "a"
	aSpec.New = func(newA func() Logic) func() Logic {
		return func() Logic {
			if aStarts.Load() == 1 {
				close(aRestarted)
			}
			return newA()
		}
	}(aSpec.New)
	got := make(chan string, 16)
	p := Spec{Name: "p", Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne}), New: func() Logic {
		var a, b Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				var err error
				if b, err = c.Spawn(bSpec); err != nil {
					c.Fail(err)
				}
				if a, err = c.Spawn(aSpec); err != nil {
					c.Fail(err)
				}
				c.Send(b, messages.Text("h", "hold"))
			case *messages.Frame:
				c.Send(b, messages.Text("q", "call"))
				c.Stop(b)
				c.Send(a, messages.Text("f", "fail"))
			case ChildFrame:
				if m.Child.Equal(b) {
					got <- m.Frame.GetStreamId() + ":" + frameName(m.Frame) + "[" + m.Frame.GetMeta().GetFailureKind() + "]"
				}
			case ChildStopped:
				if m.Child.Equal(b) {
					got <- "STOPPED"
				}
			}
		})
	}}
	ref, err := rt.Spawn(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	wait := func(ch <-chan struct{}, what string) {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal(what)
		}
	}
	wait(kEntered, "k never held")
	wait(busy, "b never got busy")
	rt.Send(ref, messages.Text("s", "go"))
	wait(aRestarted, "a was never restarted")
	releaseOnce()
	seen := untilStopped(t, ctx, got, func(s string) {
		if s == "q:END[]" {
			releaseK() // q refused: now let k stop, and b with it
		}
	})
	want := []string{
		"h:ERROR(restarted)[]", "h:END[]", // open at the restart
		"q:ERROR(" + stoppingText + ")[" + StoppedKind + "]", "q:END[]",
		"STOPPED",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("p got from b %q, want %q", seen, want)
	}
	if n := bStarts.Load(); n != 1 {
		t.Errorf("b's Logic was started %d times, want 1: its stop was taken while its restart waited", n)
	}
}
