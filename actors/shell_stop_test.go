package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/messages"
)

// startRuntime starts a runtime of its own that the test closes,
// checking that no goroutine outlives it: actorstest.NewRuntime, which
// the tests inside the package cannot import (actorstest imports it).
func startRuntime(t *testing.T) *Runtime {
	t.Helper()
	return startRuntimeWith(t, nil)
}

// startRuntimeWith starts a runtime with opts that t's cleanup closes,
// and then checks that no goroutine outlives it.
func startRuntimeWith(t *testing.T, opts *RuntimeOptions) *Runtime {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	return closedRuntime(t, opts)
}

// startHostedRuntime starts an actor system, as a host application's,
// that records actor metrics when metrics is set, and a runtime on its
// root. The test's cleanup closes the runtime, shuts the system down,
// then checks that no goroutine outlives them.
func startHostedRuntime(t *testing.T, metrics bool) (*Runtime, *actor.ActorSystem) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	// A dead letter starts a timer goroutine that lives for the
	// throttle interval, one second by default: a short one lets it end
	// before the leak check gives up.
	opts := []actor.ConfigOption{
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10 * time.Millisecond),
	}
	if metrics {
		opts = append(opts, actor.WithMetricProviders(noop.NewMeterProvider()))
	}
	system := actor.NewActorSystem(opts...)
	t.Cleanup(func() {
		system.Shutdown()
		leakcheck.VerifyNone(t, before)
	})
	return closedRuntime(t, &RuntimeOptions{Parent: system.Root}), system
}

// closedRuntime starts a runtime with opts that t's cleanup closes,
// before the cleanups registered earlier run.
func closedRuntime(t *testing.T, opts *RuntimeOptions) *Runtime {
	t.Helper()
	rt, err := NewRuntime(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return rt
}

// waitQueued spins until mb holds at least user messages and system
// system messages: the mailbox's counters are the signal that what the
// test arranged is queued (its consumer is held by the test meanwhile).
func waitQueued(mb *mailbox, user, system int32) {
	for mb.user.Load() < user || mb.sysN.Load() < system {
		runtime.Gosched()
	}
}

// frameName is how the tests below record a frame: its type, and its
// text for TEXT, TOOL_RESULT and ERROR frames.
func frameName(f *messages.Frame) string {
	switch t := f.GetType(); t {
	case messages.FrameType_TEXT, messages.FrameType_ERROR:
		return t.String() + "(" + f.GetText() + ")"
	case messages.FrameType_TOOL_RESULT:
		return t.String() + "(" + string(f.GetPayload()) + ")"
	default:
		return t.String()
	}
}

// frameLabel is how the tests record a frame with its stream:
// "stream:NAME" (frameName), and "[kind]" after it when the frame
// carries a failure kind.
func frameLabel(f *messages.Frame) string {
	label := f.GetStreamId() + ":" + frameName(f)
	if k := f.GetMeta().GetFailureKind(); k != "" {
		label += "[" + k + "]"
	}
	return label
}

// mustSpawn spawns spec as a child of c, failing c when it cannot.
func mustSpawn(c Context, spec Spec) Ref {
	ref, err := c.Spawn(spec)
	if err != nil {
		c.Fail(err)
	}
	return ref
}

// waitFor waits until ch is closed (or sends), failing t with what when
// ctx ends first.
func waitFor(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal(what)
	}
}

// answering is a duplex that answers every frame with a TEXT "r" and
// END on its stream.
func answering(name string) Spec {
	return Duplex(name, func(f *messages.Frame, emit func(*messages.Frame)) {
		emit(messages.Text(f.GetStreamId(), "r"))
		emit(messages.End(f.GetStreamId()))
	})
}

// holdingParent is a Logic with one child, spawned from spec at start.
// A frame written into it goes to the child, then (when stop is set)
// the child is stopped, and the Logic holds its mailbox until release
// is closed, having sent its mailbox to entered. What it gets from the
// child, and the child's stop, go to got; its own end closes done.
type holdingParent struct {
	spec    Spec
	stop    bool
	child   Ref
	entered chan *mailbox
	release chan struct{}
	got     chan string
	done    chan struct{}
}

func newHoldingParent(spec Spec, stop bool) *holdingParent {
	return &holdingParent{
		spec: spec, stop: stop,
		entered: make(chan *mailbox, 1), release: make(chan struct{}),
		got: make(chan string, 16), done: make(chan struct{}),
	}
}

func (p *holdingParent) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		child, err := c.Spawn(p.spec)
		if err != nil {
			c.Fail(err)
		}
		p.child = child
	case *messages.Frame:
		c.Send(p.child, m)
		if p.stop {
			c.Stop(p.child)
		}
		p.entered <- c.(*shell).mb
		<-p.release
	case ChildFrame:
		p.got <- frameName(m.Frame)
	case ChildStopped:
		p.got <- "STOPPED"
	}
}

func (p *holdingParent) OnFailure(Context, error) { close(p.done) }

// collect reads what p got up to and including last.
func (p *holdingParent) collect(last string) []string {
	var got []string
	for {
		s := <-p.got
		got = append(got, s)
		if s == last {
			return got
		}
	}
}

// TestShell_StopAfterQueuedChildFrames: Context.Stop (protoactor's
// PoisonPill) stops an actor after the messages already queued to it,
// its children's frames among them. Here a duplex's child has answered
// (TEXT and END, in the duplex's children's queue) before the duplex is
// stopped: the duplex gets both frames before it stops, though its
// mailbox otherwise takes from its input and its children's queue in
// turn.
func TestShell_StopAfterQueuedChildFrames(t *testing.T) {
	rt := startRuntime(t)
	p := newHoldingParent(answering("g"), false)
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic { return p }})
	if err != nil {
		t.Fatal(err)
	}
	rt.System().Root.Send(ref.pid, messages.Text("s", "go"))
	mb := <-p.entered
	waitQueued(mb, 2, 0)             // the child's TEXT and END
	rt.System().Root.Poison(ref.pid) // after them
	waitQueued(mb, 3, 0)
	close(p.release)
	<-p.done
	close(p.got)
	var got []string
	for s := range p.got {
		got = append(got, s)
	}
	if want := []string{"TEXT(r)", "END"}; !slices.Equal(got, want) {
		t.Errorf("the stopped duplex got %v from its child, want %v", got, want)
	}
}

// TestShell_ChildStoppedAfterItsLastFrames: a child's last frames are
// delivered before its ChildStopped, though protoactor's notice that the
// child stopped (a system message) is handled before the frames still
// queued. Here the parent is held while its child answers (TEXT, END)
// and stops.
func TestShell_ChildStoppedAfterItsLastFrames(t *testing.T) {
	rt := startRuntime(t)
	p := newHoldingParent(answering("c"), true)
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic { return p }})
	if err != nil {
		t.Fatal(err)
	}
	rt.System().Root.Send(ref.pid, messages.Text("s", "go"))
	waitQueued(<-p.entered, 2, 1) // the child's TEXT and END, and its Terminated
	close(p.release)
	if got, want := p.collect("STOPPED"), []string{"TEXT(r)", "END", "STOPPED"}; !slices.Equal(got, want) {
		t.Errorf("the parent got %v, want %v", got, want)
	}
}

// TestShell_StoppedWrapperAnswersOnce: a wrapper stopped by its parent
// after its inner duplex's answer was queued to it passes the answer on
// and then stops with nothing open: the call gets one result (not the
// result and then a "stopped" ERROR), and the parent gets it, its END
// and then the wrapper's ChildStopped.
func TestShell_StoppedWrapperAnswersOnce(t *testing.T) {
	rt := startRuntime(t)
	inner := Duplex("tool", func(f *messages.Frame, emit func(*messages.Frame)) {
		emit(messages.RawToolResult(f.GetStreamId(), "c1", "t", []byte(`"ok"`)))
		emit(messages.End(f.GetStreamId()))
	})
	entered, release := make(chan *mailbox, 1), make(chan struct{})
	hooks := Hooks{OnRequest: func(c WrapperContext, f *messages.Frame) {
		c.ToInner(f)
		entered <- c.(*WrapperLogic).c.(*shell).mb
		<-release // the wrapper is held while the answer and the stop queue up
	}}
	stopper := &stoppingParent{wrapped: Wrap("w", inner, func() Wrapped { return hooks }), got: make(chan string, 16)}
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic { return stopper }})
	if err != nil {
		t.Fatal(err)
	}
	rt.System().Root.Send(ref.pid, messages.ToolCall("s", "c1", "t", []byte(`{}`)))
	wmb := <-entered
	waitQueued(wmb, 2, 0) // the inner's TOOL_RESULT and END
	rt.System().Root.Send(ref.pid, messages.Text("x", "stop"))
	waitQueued(wmb, 3, 0) // the parent's stop after them
	close(release)
	var got []string
	for s := range stopper.got {
		got = append(got, s)
		if s == "STOPPED" {
			break
		}
	}
	if want := []string{`TOOL_RESULT("ok")`, "END", "STOPPED"}; !slices.Equal(got, want) {
		t.Errorf("the wrapper's parent got %v, want %v", got, want)
	}
}

// stoppingParent spawns wrapped at start, writes frames into it, and
// stops it when written a TEXT "stop". What it gets from it, and its
// stop, go to got.
type stoppingParent struct {
	wrapped Spec
	w       Ref
	got     chan string
}

func (p *stoppingParent) Receive(c Context, msg any) {
	switch m := msg.(type) {
	case Started:
		w, err := c.Spawn(p.wrapped)
		if err != nil {
			c.Fail(err)
		}
		p.w = w
	case *messages.Frame:
		if m.GetText() == "stop" {
			c.Stop(p.w)
			return
		}
		c.Send(p.w, m)
	case ChildFrame:
		p.got <- frameName(m.Frame)
	case ChildStopped:
		p.got <- "STOPPED"
	}
}

// TestShell_RestartedParentKeepsItsNewChild: a parent that restarts
// stops its children and spawns one with the same name anew; the old
// child's stop is no news to the new incarnation (no ChildStopped), and
// the new child's frames reach it.
func TestShell_RestartedParentKeepsItsNewChild(t *testing.T) {
	rt := startRuntime(t)
	got := make(chan string, 16)
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic {
		var child Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				var err error
				if child, err = c.Spawn(answering("c")); err != nil {
					c.Fail(err)
				}
				got <- "STARTED"
			case *messages.Frame:
				if m.GetText() == "fail" {
					c.Fail(errors.New("asked to"))
				}
				c.Send(child, m)
			case ChildFrame:
				got <- frameName(m.Frame)
			case ChildStopped:
				got <- "STOPPED"
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	root := rt.System().Root
	root.Send(ref.pid, messages.Text("s", "fail"))
	root.Send(ref.pid, messages.Text("s", "go"))
	var seen []string
	for s := range got {
		seen = append(seen, s)
		if s == "END" {
			break
		}
	}
	if want := []string{"STARTED", "STARTED", "TEXT(r)", "END"}; !slices.Equal(seen, want) {
		t.Errorf("the parent got %v, want %v", seen, want)
	}
}

// TestShell_NameReusedOnlyAfterChildStopped: a Logic that stops its
// named child and spawns a new one under the same name before the old
// one's ChildStopped gets ErrChildNameInUse (protoactor frees the name
// earlier, and the new child would take the old one's place: its last
// answer and its ChildStopped would be lost); once the ChildStopped has
// come, the name is free, and the old child's answer came before it.
func TestShell_NameReusedOnlyAfterChildStopped(t *testing.T) {
	rt := startRuntime(t)
	got := make(chan string, 16)
	entered, release := make(chan *mailbox, 1), make(chan struct{})
	var old, nu Ref
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic {
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				var err error
				if old, err = c.Spawn(answering("c")); err != nil {
					c.Fail(err)
				}
			case *messages.Frame:
				c.Send(old, m) // a call routed to the old child
				c.Stop(old)
				entered <- c.(*shell).mb
				<-release // the old child answers, stops, leaves the registry
				if _, err := c.Spawn(answering("c")); !errors.Is(err, ErrChildNameInUse) {
					got <- fmt.Sprintf("spawn before ChildStopped: %v", err)
				}
			case ChildFrame:
				who := "old"
				if m.Child.pid == nu.pid {
					who = "new"
				}
				got <- who + ":" + frameName(m.Frame)
			case ChildStopped:
				got <- "old:STOPPED"
				var err error
				if nu, err = c.Spawn(answering("c")); err != nil {
					got <- fmt.Sprintf("spawn after ChildStopped: %v", err)
					return
				}
				c.Send(nu, messages.Text("s2", "again"))
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	root := rt.System().Root
	root.Send(ref.pid, messages.Text("s", "go"))
	mb := <-entered
	waitQueued(mb, 2, 1) // the old child's TEXT and END, then its Terminated
	close(release)
	var seen []string
	for s := range got {
		seen = append(seen, s)
		if s == "new:END" || strings.HasPrefix(s, "spawn") {
			break
		}
	}
	if want := []string{"old:TEXT(r)", "old:END", "old:STOPPED", "new:TEXT(r)", "new:END"}; !slices.Equal(seen, want) {
		t.Fatalf("the parent saw %q, want %q", seen, want)
	}
}
