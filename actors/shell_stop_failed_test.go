package actors

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

// The tests here stop a duplex that failed, or that restarts for its
// sibling's failure: a stop asked for before the restart wins over it,
// and the calls written meanwhile are refused, as by any stopping duplex.

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
					c.Send(mustSpawn(c, *child), messages.Text("k", "hold"))
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

// parentOf is the spec of a duplex "p" that spawns spec as it starts and
// hands each frame written into it to onFrame, with its child. What the
// child sends it (as frameLabel records it), and the child's stop
// ("STOPPED"), go to got.
func parentOf(spec Spec, got chan<- string, onFrame func(c Context, child Ref, f *messages.Frame)) Spec {
	return Spec{Name: "p", New: func() Logic {
		var child Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				child = mustSpawn(c, spec)
			case *messages.Frame:
				onFrame(c, child, m)
			case ChildFrame:
				got <- frameLabel(m.Frame)
			case ChildStopped:
				got <- "STOPPED"
			}
		})
	}}
}

// stopsFailedChild is the spec of a duplex "p" (parentOf) that spawns
// spec at start and, on a frame written into it, writes its child a call
// that fails it and the frames of early, stops it and then writes it the
// frames of late, all in one turn: the stop is queued at the child before
// its supervisor (this actor, after the turn) decides to restart it. What
// it gets from the child, and the child's stop ("STOPPED"), go to got.
func stopsFailedChild(spec Spec, early, late []*messages.Frame, got chan<- string) Spec {
	return parentOf(spec, got, func(c Context, d Ref, _ *messages.Frame) {
		c.Send(d, messages.Text("f", "fail"))
		for _, f := range early {
			c.Send(d, f)
		}
		c.Stop(d)
		for _, f := range late {
			c.Send(d, f)
		}
	})
}

// TestShell_StopBeforeRestartWins: a duplex stopped by its parent
// (Context.Stop) after it failed and before its supervisor's restart
// reaches it stops, and is not restarted first: its Logic starts once,
// its failed call is answered once with the failure, and its parent
// gets its ChildStopped. The runtime's observers are not told of a
// restart that does not happen.
func TestShell_StopBeforeRestartWins(t *testing.T) {
	var mu sync.Mutex
	var told []string
	rt := startRuntimeWith(t, &RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, ev.Directive.String()+" "+ev.Child)
	}})
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
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 0 {
		t.Errorf("OnSupervision was told %q, want nothing: the child stopped, it did not restart", told)
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
	rt := startRuntime(t)
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
	decided, proceed := make(chan struct{}), make(chan struct{})
	var decidedOnce sync.Once
	releaseHost := sync.OnceFunc(func() { close(proceed) })
	rt := startRuntimeWith(t, &RuntimeOptions{Supervision: strategy, OnSupervision: func(ev supervisor.Event) {
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
	got := recvUntil(t, conn, "n", "END")
	if want := append([]string{"f:ERROR(boom)", "f:END"}, refusedLate...); !slices.Equal(got, want) {
		t.Errorf("the Conn read %q, want %q", got, want)
	}
	releaseHost()
	releaseK()
	if f, err := conn.Recv(testContext(t)); !errors.Is(err, ErrDuplexStopped) {
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
	decided, proceed := make(chan struct{}), make(chan struct{})
	var decidedOnce sync.Once
	releaseHost := sync.OnceFunc(func() { close(proceed) })
	var mu sync.Mutex
	var events []string
	rt := startRuntimeWith(t, &RuntimeOptions{
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

// stopsBFailsA is the spec of a parent "p" supervising all-for-one that
// spawns bSpec and then aSpec as it starts (b first: the all-for-one
// restart reaches the children in the order they were spawned, so a's
// restart comes after b's restart was queued) and writes b start, unless
// nil. On a frame written into it, it writes b call, stops b
// (Context.Stop) and fails a, in one turn. What b sends it, and b's stop
// ("STOPPED"), go to got.
func stopsBFailsA(aSpec, bSpec Spec, start, call *messages.Frame, got chan<- string) Spec {
	return Spec{Name: "p", Supervision: supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne}), New: func() Logic {
		var a, b Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				b = mustSpawn(c, bSpec)
				a = mustSpawn(c, aSpec)
				if start != nil {
					c.Send(b, start)
				}
			case *messages.Frame:
				c.Send(b, call)
				c.Stop(b)
				c.Send(a, messages.Text("f", "fail"))
			case ChildFrame:
				if m.Child.Equal(b) {
					got <- frameLabel(m.Frame)
				}
			case ChildStopped:
				if m.Child.Equal(b) {
					got <- "STOPPED"
				}
			}
		})
	}}
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
	seen, bStarts := stopHealthySibling(t, startRuntime(t), nil, nil)
	if !slices.Contains(seen, "q:TEXT(served)") {
		t.Errorf("the parent got %q from b: the call written before its stop was not served", seen)
	}
	if bStarts != 2 {
		t.Errorf("b's Logic was started %d times, want 2: restarted, then stopped", bStarts)
	}
}

// TestShell_StopOfHealthySiblingRestartingForItsChild is
// TestShell_StopOfHealthySiblingAfterQueuedCalls with b holding a child
// k that is slow to stop: b's restart for its sibling's failure waits
// for k, and b takes what is queued meanwhile, its stop included. The
// call written before the stop is refused as by a stopping duplex (with
// StoppedKind: b does not come back), once, and b's Logic is not started
// again.
func TestShell_StopOfHealthySiblingRestartingForItsChild(t *testing.T) {
	rt := startRuntime(t)
	k, kEntered, releaseK := holdingChild(t)
	// k is let go once b has taken its stop: releasing it when q's END
	// comes would let k's end reach b, completing its restart, before b
	// takes the stop queued after q (a restart that completes first is
	// carried out, and the stop then ends the fresh incarnation).
	defer rt.WatchActors(func(ev ActorEvent) {
		if ev.Actor.Name == "b" && ev.Actor.State == ActorStopped {
			releaseK()
		}
	})()
	seen, bStarts := stopHealthySibling(t, rt, &k, kEntered)
	want := []string{
		"h:ERROR(restarted)", "h:END", // open at the restart
		"q:ERROR(" + stoppingText + ")[" + StoppedKind + "]", "q:END",
		"STOPPED",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("p got from b %q, want %q", seen, want)
	}
	if bStarts != 1 {
		t.Errorf("b's Logic was started %d times, want 1: its stop was taken while its restart waited", bStarts)
	}
}

// stopHealthySibling runs the TestShell_StopOfHealthySibling tests on
// rt: p (stopsBFailsA) has b hold on to a call "h" until released, then
// writes b a call "q", stops it and fails a; b is released once a has
// been restarted, so b's restart waits in its mailbox before the call and
// the stop. b answers a TEXT with TEXT "served" and END; with k set, b's
// first incarnation spawns k and writes it a frame, and the run waits
// for kEntered. It returns what p got from b and how many times b's
// Logic was started.
func stopHealthySibling(t *testing.T, rt *Runtime, k *Spec, kEntered <-chan struct{}) (seen []string, bStarts int32) {
	t.Helper()
	var bStarted, aStarts atomic.Int32
	busy, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	aRestarted := make(chan struct{})
	bSpec := Spec{Name: "b", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				if bStarted.Add(1) == 1 && k != nil {
					c.Send(mustSpawn(c, *k), messages.Text("k", "hold"))
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
			if aStarts.Load() == 1 { // a's second incarnation: restarted
				close(aRestarted)
			}
			return newA()
		}
	}(aSpec.New)
	got := make(chan string, 16)
	ref, err := rt.Spawn(stopsBFailsA(aSpec, bSpec, messages.Text("h", "hold"), messages.Text("q", "call"), got))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if k != nil {
		waitFor(t, ctx, kEntered, "k never held")
	}
	waitFor(t, ctx, busy, "b never got busy")
	rt.Send(ref, messages.Text("s", "go"))
	waitFor(t, ctx, aRestarted, "a was never restarted")
	// b's restart waits in its mailbox, before the call and the stop.
	releaseOnce()
	return untilStopped(t, ctx, got, nil), bStarted.Load()
}

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
	gate := &heldDispatcher{}
	aMb, bMb := make(chan *mailbox, 1), make(chan *mailbox, 1)
	var mbA, mbB *mailbox
	var first sync.Once
	bothDecided := make(chan struct{})
	var events atomic.Int32
	rt := startRuntimeWith(t, &RuntimeOptions{OnSupervision: func(ev supervisor.Event) {
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
	t.Cleanup(gate.release) // before the runtime is closed
	var aStarts, bStarts atomic.Int32
	aSpec := failingChild(&aStarts, nil)
	aSpec.Name = "a"
	bSpec := failingChild(&bStarts, nil)
	bSpec.Name = "b"
	bSpec.Dispatcher = gate
	aSpec, bSpec = handsOverMailbox(aSpec, aMb), handsOverMailbox(bSpec, bMb)
	got := make(chan string, 64)
	ref, err := rt.Spawn(stopsBFailsA(aSpec, bSpec, nil, messages.Text("f", "fail"), got))
	if err != nil {
		t.Fatal(err)
	}
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	waitFor(t, ctx, bothDecided, "no two decisions")
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
