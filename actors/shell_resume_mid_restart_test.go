package actors

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// TestShell_StaleResumeOfEscalatedChildMidRestart: p escalates its
// child c's failure; before p's supervisor resumes p, a sibling's
// failure restarts c (all-for-one), and c's restart waits for its own
// child k, held. p's Resume then resumes c, the child whose failure it
// escalated: c, restarting, is no longer the incarnation that failed,
// and stays suspended. A call written to c meanwhile waits for c's next
// incarnation, which serves it once k is released; it is not refused as
// by a restarting duplex.
func TestShell_StaleResumeOfEscalatedChildMidRestart(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	atGate, gate := make(chan struct{}), make(chan struct{})
	restarted := make(chan struct{}, 1)
	rt := closedRuntime(t, &RuntimeOptions{
		Supervision: resumeAll(),
		OnSupervision: func(ev supervisor.Event) {
			if ev.Directive == supervisor.Resume && strings.HasSuffix(ev.Child, "/p") {
				close(atGate)
				<-gate
			}
			if ev.Directive == supervisor.Restart && strings.HasSuffix(ev.Child, "/s") {
				restarted <- struct{}{}
			}
		},
	})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	kSpec := Spec{Name: "k", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetText() == "hold" {
				<-release // k holds its turn: its stop, and c's restart, wait
			}
		})
	}}
	mbs := make(chan *mailbox, 2)
	cSpec := Spec{Name: "c", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				mbs <- c.(*shell).mb
				k, err := c.Spawn(kSpec)
				if err != nil {
					c.Fail(err)
				}
				c.Send(k, messages.Text("k", "hold"))
			case *messages.Frame:
				if m.GetText() == "fail" {
					c.Fail(errors.New("boom"))
				}
				c.Emit(messages.Text(m.GetStreamId(), "served"))
				c.Emit(messages.End(m.GetStreamId()))
			}
		})
	}}
	sSpec := siblingSpec()
	refs := make(chan [2]Ref, 1)
	got := make(chan string, 16)
	pSpec := Spec{Name: "p", Supervision: escalatingBoom(0), New: func() Logic {
		var c Ref
		return LogicFunc(func(ctx Context, msg any) {
			switch m := msg.(type) {
			case Started:
				c, _ = ctx.Spawn(cSpec)
				s, _ := ctx.Spawn(sSpec)
				refs <- [2]Ref{c, s}
			case *messages.Frame:
				if m.GetText() == "probe" {
					got <- "probe"
					return
				}
				ctx.Send(c, messages.Text("f", "fail"))
			case ChildFrame:
				got <- m.Frame.GetStreamId() + ":" + frameName(m.Frame)
			}
		})
	}}
	p, err := rt.Spawn(pSpec)
	if err != nil {
		t.Fatal(err)
	}
	cs := <-refs
	mb := <-mbs
	ctx := testContext(t)
	rt.Send(p, messages.Text("x", "go"))
	select {
	case <-atGate:
	case <-ctx.Done():
		t.Fatal("p's failure never reached its supervisor")
	}
	rt.Send(cs[1], messages.Text("x", "sib"))
	<-restarted                                // p restarts c and s, in p's turn, before p's Resume
	rt.Send(cs[0], messages.Text("n", "call")) // waits for c's next incarnation
	close(gate)
	rt.Send(p, messages.Text("x", "probe"))
	var seen []string
	for s := range got {
		if s == "probe" {
			break // p was resumed, and resumed c, before
		}
		seen = append(seen, s)
	}
	// c takes p's Resume (its system messages are all taken) and its run
	// ends, while k is held: a call c took meanwhile has been answered.
	for mb.sysN.Load() > 0 || mb.status.Load() != mailboxIdle {
		runtime.Gosched()
	}
	free()
	for !slices.Contains(seen, "n:END") {
		select {
		case s := <-got:
			seen = append(seen, s)
		case <-ctx.Done():
			t.Fatalf("no answer to the call; got %q", seen)
		}
	}
	var onN []string
	for _, s := range seen {
		if strings.HasPrefix(s, "n:") {
			onN = append(onN, s)
		}
	}
	if want := []string{"n:TEXT(served)", "n:END"}; !slices.Equal(onN, want) {
		t.Errorf("the call queued while c restarted got %q, want %q (from c's next incarnation)", onN, want)
	}
}

// siblingSpec is a duplex "s" that fails ("sib") on a TEXT "sib": the
// sibling whose failure restarts its siblings under all-for-one.
func siblingSpec() Spec {
	return Spec{Name: "s", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			if f, ok := msg.(*messages.Frame); ok && f.GetText() == "sib" {
				c.Fail(errors.New("sib"))
			}
		})
	}}
}

// escalatingBoom is an all-for-one strategy that escalates a failure
// "boom" and restarts on any other, after backoff (none when zero).
func escalatingBoom(backoff time.Duration) *supervisor.Strategy {
	return supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne, InitialBackoff: backoff,
		Decider: func(err error) supervisor.Directive {
			if err.Error() == "boom" {
				return supervisor.Escalate
			}
			return supervisor.Restart
		}})
}
