package actors

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// heldDispatcher is a dispatcher that runs each scheduled run on a goroutine
// of its own, except while held: the runs wait until release.
type heldDispatcher struct {
	mu      sync.Mutex
	held    bool
	pending []func()
}

func (d *heldDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if d.held {
		d.pending = append(d.pending, fn)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	go fn()
}
func (d *heldDispatcher) Throughput() int { return 300 }
func (d *heldDispatcher) hold()           { d.mu.Lock(); d.held = true; d.mu.Unlock() }
func (d *heldDispatcher) release() {
	d.mu.Lock()
	d.held = false
	p := d.pending
	d.pending = nil
	d.mu.Unlock()
	for _, fn := range p {
		go fn()
	}
}

// handsOverMailbox wraps spec so that its first incarnation hands its
// mailbox to mb as it starts.
func handsOverMailbox(spec Spec, mb chan<- *mailbox) Spec {
	inner := spec.New
	var once sync.Once
	spec.New = func() Logic {
		l := inner()
		return LogicFunc(func(c Context, msg any) {
			if _, ok := msg.(Started); ok {
				once.Do(func() { mb <- c.(*shell).mb })
			}
			l.Receive(c, msg)
		})
	}
	return spec
}

// TestShell_StopOfFailedChildWinsOverTwoRestarts: under all-for-one,
// b fails and its parent stops it (Context.Stop) in the same turn as it
// fails b's sibling a. Both failures reach the parent before it decides:
// each decision restarts both children, so b gets two Restarts. The stop
// was asked for before either: the first Restart is taken as the stop,
// and the second is dropped, b's Logic not started again. With hold,
// b's two Restarts are both queued before b takes the first.
func TestShell_StopOfFailedChildWinsOverTwoRestarts(t *testing.T) {
	for _, hold := range []bool{true, false} {
		t.Run(map[bool]string{true: "held", false: "natural"}[hold], func(t *testing.T) { testStopOfFailedChildOverTwoRestarts(t, hold) })
	}
}

func testStopOfFailedChildOverTwoRestarts(t *testing.T, hold bool) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	gate := &heldDispatcher{}
	t.Cleanup(gate.release)
	aMb, bMb := make(chan *mailbox, 1), make(chan *mailbox, 1)
	var mbA, mbB *mailbox
	var first sync.Once
	bothDecided := make(chan struct{})
	var events atomic.Int32
	rt := closedRuntime(t, &RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
		if !strings.Contains(ev.Supervisor, "/p") {
			return
		}
		first.Do(func() {
			// In p's turn, before its first directive: wait until both
			// children have failed and wait for the decision.
			mbA, mbB = <-aMb, <-bMb
			for _, mb := range []*mailbox{mbA, mbB} {
				for !mb.suspended.Load() || mb.status.Load() != mailboxIdle || mb.sysN.Load() != 0 {
					runtime.Gosched()
				}
			}
			if hold {
				gate.hold()
			}
		})
		if events.Add(1) == 2 {
			close(bothDecided)
		}
	}})
	var aStarts, bStarts atomic.Int32
	aSpec := failingChild(&aStarts, nil)
	aSpec.Name = "a"
	bSpec := failingChild(&bStarts, nil)
	bSpec.Name = "b"
	bSpec.Dispatcher = gate
	aSpec, bSpec = handsOverMailbox(aSpec, aMb), handsOverMailbox(bSpec, bMb)
	got := make(chan string, 64)
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
			case *messages.Frame:
				c.Send(b, messages.Text("f", "fail"))
				c.Stop(b)
				c.Send(a, messages.Text("f", "fail"))
			case ChildFrame:
				if m.Child.Equal(b) {
					got <- m.Frame.GetStreamId() + ":" + frameName(m.Frame)
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
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	select {
	case <-bothDecided:
	case <-ctx.Done():
		t.Fatal("no two decisions")
	}
	if hold {
		waitQueued(mbB, 0, 2) // both Restarts queued at b
		gate.release()
	}
	seen := untilStopped(t, ctx, got, nil)
	if want := []string{"f:ERROR(boom)", "f:END", "STOPPED"}; !slices.Equal(seen, want) {
		t.Errorf("p got from b %q, want %q", seen, want)
	}
	if n := bStarts.Load(); n != 1 {
		t.Errorf("b's Logic was started %d times, want 1: its stop, queued before both restarts, did not win", n)
	}
}
