package actors

import (
	"errors"
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
// it and the frames of early, stops it and then writes it the frames of
// late, all in one turn: the stop is queued at the child before its
// supervisor (this actor, after the turn) decides to restart it. What
// it gets from the child, and the child's stop ("STOPPED"), go to got.
func stopsFailedChild(spec Spec, early, late []*messages.Frame, got chan<- string) Spec {
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
				for _, f := range early {
					c.Send(d, f)
				}
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
	ref, err := rt.Spawn(stopsFailedChild(failingChild(&starts, nil), nil, nil, got))
	if err != nil {
		t.Fatal(err)
	}
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	seen := untilStopped(t, ctx, got, nil)
	if want := []string{"f:ERROR(boom)", "f:END", "STOPPED"}; !slices.Equal(seen, want) {
		t.Errorf("the parent got %q, want %q", seen, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the child's Logic was started %d times, want 1: a stop that came before the restart did not win", n)
	}
}

// TestShell_CallToFailedStoppingDuplexIsRefused: a call written into a
// duplex that failed and is stopping (its child still finishing), its
// restart dropped or never decided, is refused as a call to any
// stopping duplex is: one ERROR with failure kind StoppedKind, and END,
// at once; its Logic never sees it, and is not started again. So is a
// call written into a failed duplex before its parent stopped it: its
// Logic cannot answer it, and the stop wins over the restart that
// would have.
func TestShell_CallToFailedStoppingDuplexIsRefused(t *testing.T) {
	t.Run("stopped by its parent before its restart", func(t *testing.T) { testFailedChildStoppedByParent(t, true) })
	t.Run("written before its parent stopped it", func(t *testing.T) { testFailedChildStoppedByParent(t, false) })
	t.Run("stopped by its supervisor", func(t *testing.T) {
		testFailedDuplexStopping(t, supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts}), false)
	})
	t.Run("closed while its restart waits", func(t *testing.T) { testFailedDuplexStopping(t, nil, true) })
}

// refusedLate is how the tests here record a call refused by a
// stopping duplex.
var refusedLate = []string{"n:ERROR(" + stoppingText + ")[" + StoppedKind + "]", "n:END"}

// testFailedChildStoppedByParent has a parent fail its child, stop it
// and write it a call, the call after the stop (and the child stopping,
// its own child holding) when afterStop, else before it (the child
// without a child: it stops as soon as it takes the stop). Either way
// the call is refused, as the calls queued before a stop of a duplex
// that has not failed are answered first.
func testFailedChildStoppedByParent(t *testing.T, afterStop bool) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, nil)
	var starts atomic.Int32
	got := make(chan string, 16)
	late := []*messages.Frame{messages.Text("n", "late")}
	releaseK := func() {}
	spec := stopsFailedChild(failingChild(&starts, nil), late, nil, got)
	var kEntered <-chan struct{}
	if afterStop {
		var k Spec
		k, kEntered, releaseK = holdingChild(t)
		spec = stopsFailedChild(failingChild(&starts, &k), nil, late, got)
	}
	ref, err := rt.Spawn(spec)
	if err != nil {
		t.Fatal(err)
	}
	if afterStop {
		<-kEntered
	}
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	seen := untilStopped(t, ctx, got, func(s string) {
		if s == "n:END" {
			releaseK() // refused while stopping: now let it stop
		}
	})
	want := append([]string{"f:ERROR(boom)", "f:END"}, refusedLate...)
	if want = append(want, "STOPPED"); !slices.Equal(seen, want) {
		t.Errorf("the parent got %q, want %q", seen, want)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the child's Logic was started %d times, want 1", n)
	}
}

// testFailedDuplexStopping starts a failing duplex with a holding child
// under a runtime supervising with strategy, fails it and, when
// closeIt, stops it while its supervisor has decided to restart it and
// waits; then writes it a call, which must be refused.
func testFailedDuplexStopping(t *testing.T, strategy *supervisor.Strategy, closeIt bool) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	decided, proceed := make(chan struct{}), make(chan struct{})
	var decidedOnce sync.Once
	releaseHost := sync.OnceFunc(func() { close(proceed) })
	rt := closedRuntime(t, &RuntimeOptions{Supervision: strategy, OnSupervision: func(ev supervisor.Event) {
		if closeIt && ev.Directive == supervisor.Restart && strings.HasSuffix(ev.Child, "/d") {
			decidedOnce.Do(func() { close(decided); <-proceed })
		}
	}})
	t.Cleanup(releaseHost) // before the runtime is closed
	var starts atomic.Int32
	k, kEntered, releaseK := holdingChild(t)
	conn, err := rt.Start(failingChild(&starts, &k))
	if err != nil {
		t.Fatal(err)
	}
	<-kEntered
	if err := conn.Send(messages.Text("f", "fail")); err != nil {
		t.Fatal(err)
	}
	if closeIt {
		<-decided // the host holds the restart
		rt.System().Root.Stop(conn.pid)
	}
	if err := conn.Send(messages.Text("n", "late")); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []string
	for len(got) == 0 || got[len(got)-1] != "n:END" {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v after %q", err, got)
		}
		name := f.GetStreamId() + ":" + frameName(f)
		if k := f.GetMeta().GetFailureKind(); k != "" {
			name += "[" + k + "]"
		}
		got = append(got, name)
	}
	if want := append([]string{"f:ERROR(boom)", "f:END"}, refusedLate...); !slices.Equal(got, want) {
		t.Errorf("the Conn read %q, want %q", got, want)
	}
	releaseHost()
	releaseK()
	if f, err := conn.Recv(ctx); !errors.Is(err, ErrDuplexStopped) {
		t.Errorf("Recv once the duplex stopped: %v, %v; want ErrDuplexStopped", f, err)
	}
	if n := starts.Load(); n != 1 {
		t.Errorf("the Logic was started %d times, want 1", n)
	}
}

// TestShell_StoppedWithoutLogicTakesNoFrame: a duplex whose Spec's New
// panicked has no Logic; stopped by its supervisor, it takes what
// waited in its mailbox as any stopped duplex does, and hands no frame
// to the Logic it lacks (which would fail it once more, a failure its
// supervisor would be told about after its stop).
func TestShell_StoppedWithoutLogicTakesNoFrame(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	decided, proceed := make(chan struct{}), make(chan struct{})
	var decidedOnce sync.Once
	releaseHost := sync.OnceFunc(func() { close(proceed) })
	var mu sync.Mutex
	var events []string
	rt := closedRuntime(t, &RuntimeOptions{
		Supervision: supervisor.MustNew(&supervisor.Options{MaxRestarts: supervisor.NoRestarts}),
		OnSupervision: func(ev supervisor.Event) {
			if !strings.HasSuffix(ev.Child, "/d") {
				return
			}
			mu.Lock()
			events = append(events, ev.Directive.String())
			mu.Unlock()
			decidedOnce.Do(func() { close(decided); <-proceed })
		},
	})
	t.Cleanup(releaseHost) // before the runtime is closed
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic { panic("no logic") }})
	if err != nil {
		t.Fatal(err)
	}
	<-decided // the host holds its decision to stop d, failed
	mb := firstMailbox(t, rt, 1)
	if err := conn.Send(messages.Text("n", "late")); err != nil {
		t.Fatal(err)
	}
	releaseHost()
	if _, err := conn.Recv(testContext(t)); !errors.Is(err, ErrDuplexStopped) {
		t.Fatalf("Recv: %v, want ErrDuplexStopped", err)
	}
	waitSettled(mb) // d, stopped, has taken the frame
	// A round trip through the host: it has taken what d sent it before.
	other, err := rt.Start(Duplex("other", func(*messages.Frame, func(*messages.Frame)) {}))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{supervisor.Stop.String()}; !slices.Equal(events, want) {
		t.Errorf("the supervisor decided %q about d, want %q", events, want)
	}
}

// TestShell_StopOfHealthySiblingAfterQueuedCalls: a parent supervising
// all-for-one writes its healthy child b a call and then stops it
// (Context.Stop), while b is still busy, and then fails its other child
// a. The all-for-one restart reaches b, which did not fail, with b's
// stop still queued behind the call: b is restarted and serves the call
// ("after the messages already queued to it"), and then stops. Only a
// duplex waiting on its own failure has its restart give way to a
// queued stop.
func TestShell_StopOfHealthySiblingAfterQueuedCalls(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	rt := closedRuntime(t, nil)
	var bStarts, aStarts atomic.Int32
	busy, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	aRestarted := make(chan struct{})
	// b answers a TEXT with TEXT "served" and END, but holds on to "hold"
	// until released.
	bSpec := Spec{Name: "b", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				bStarts.Add(1)
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
			if aStarts.Load() == 1 { // a's second incarnation: restarted
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
				// b first: the all-for-one restart reaches the children
				// in the order they were spawned, so a's restart comes
				// after b's restart was queued.
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
	ctx := testContext(t)
	wait := func(ch <-chan struct{}, what string) {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal(what)
		}
	}
	wait(busy, "b never got busy")
	rt.Send(ref, messages.Text("s", "go"))
	wait(aRestarted, "a was never restarted")
	// b's restart waits in its mailbox, before the call and the stop.
	releaseOnce()
	seen := untilStopped(t, ctx, got, nil)
	if !slices.Contains(seen, "q:TEXT(served)") {
		t.Errorf("the parent got %q from b: the call written before its stop was not served", seen)
	}
	if n := bStarts.Load(); n != 2 {
		t.Errorf("b's Logic was started %d times, want 2: restarted, then stopped", n)
	}
}
