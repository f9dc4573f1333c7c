package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/messages"
)

// TestShell_NewStreamOnStoppingDuplex: a frame that opens a new stream
// on a duplex that is stopping (stopped, with a child still finishing)
// is answered at once with ERROR (failure kind "stopped") and END, and
// only once however many frames of that stream come; the Logic never
// sees it. Frames of a stream the stop closed (with its own ERROR and
// END) and frames that open nothing (CANCEL) are dropped, as before.
// The caller here is a Conn; on both delivery paths (frames handed to
// the shell directly, and through protoactor when it records metrics).
func TestShell_NewStreamOnStoppingDuplex(t *testing.T) {
	for _, metrics := range []bool{false, true} {
		t.Run(fmt.Sprintf("metrics=%v", metrics), func(t *testing.T) { testNewStreamOnStoppingDuplex(t, metrics) })
	}
}

func testNewStreamOnStoppingDuplex(t *testing.T, metrics bool) {
	rt, system := startHostedRuntime(t, metrics)
	probe := &stopProbe{entered: make(chan *mailbox, 1), release: make(chan struct{})}
	childEntered, childRelease := make(chan struct{}), make(chan struct{})
	releaseChild := sync.OnceFunc(func() { close(childRelease) })
	t.Cleanup(releaseChild)
	probe.child = Duplex("k", func(*messages.Frame, func(*messages.Frame)) {
		close(childEntered)
		<-childRelease // the duplex stays stopping until then
	})
	conn, err := rt.Start(Spec{Name: "d", New: func() Logic { return probe }})
	if err != nil {
		t.Fatal(err)
	}
	<-childEntered

	// Stream h is left open (the probe holds on it, then returns without
	// END); stream a is answered (END) before the stop.
	send := func(f *messages.Frame) {
		t.Helper()
		if err := conn.Send(f); err != nil {
			t.Fatalf("send %s:%s: %v", f.GetStreamId(), frameName(f), err)
		}
	}
	send(messages.Text("h", "hold"))
	mb := <-probe.entered
	close(probe.release)
	send(messages.Text("a", "before"))
	waitDrained(mb)
	system.Root.Stop(conn.pid) // a system message: handled before the mailbox goes idle
	waitDrained(mb)

	// Stopping: its child holds. A new stream (b, two frames), stream a
	// again (a new call: its last one ended), the stream the stop closed
	// (h), and a CANCEL of a stream never opened.
	send(messages.Text("b", "late"))
	send(messages.Text("b", "again"))
	send(messages.Text("a", "late"))
	send(messages.Text("h", "late"))
	send(messages.Cancel("c", ""))
	waitDrained(mb)

	// Everything the duplex emitted so far is queued in the Conn (its
	// port takes frames as they are sent): read it without waiting.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var got []string
	for {
		f, err := conn.Recv(done)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Recv while the duplex is stopping: %v, want the frames queued and then nothing", err)
			}
			break
		}
		name := f.GetStreamId() + ":" + frameName(f)
		if f.GetType() == messages.FrameType_ERROR {
			name += "[" + f.GetMeta().GetFailureKind() + "]"
		}
		got = append(got, name)
	}
	refused := "ERROR(" + stoppingText + ")[" + StoppedKind + "]"
	want := []string{
		"a:END",
		"h:ERROR(duplex stopped)[" + StoppedKind + "]", "h:END",
		"b:" + refused, "b:END",
		"a:" + refused, "a:END",
	}
	if !slices.Equal(got, want) {
		t.Errorf("while the duplex is stopping, the caller got\n %q\nwant\n %q", got, want)
	}

	releaseChild()
	if f, err := conn.Recv(testContext(t)); !errors.Is(err, ErrDuplexStopped) {
		t.Errorf("Recv once the duplex stopped: %v, %v; want ErrDuplexStopped and nothing more", f, err)
	}
	probe.mu.Lock()
	log := probe.log
	probe.mu.Unlock()
	if want := []string{"Started", "h:hold", "a:before", "stopped"}; !slices.Equal(log, want) {
		t.Errorf("the Logic got %q, want %q", log, want)
	}
}

// holdingChild is the child of a stopProbe: it holds on the first frame
// written into it, which closes entered, until release is closed.
// startHeldMux starts a Mux on a stopProbe duplex whose child holds its
// first frame, and returns once the child holds it: a stop of the duplex
// then leaves it stopping until releaseChild.
func startHeldMux(t *testing.T) (rt *Runtime, mux *Mux, probe *stopProbe, releaseChild func()) {
	t.Helper()
	rt = startRuntime(t)
	probe = &stopProbe{entered: make(chan *mailbox, 1), release: make(chan struct{})}
	var childEntered <-chan struct{}
	probe.child, childEntered, releaseChild = holdingChild(t)
	mux, err := rt.StartMux(Spec{Name: "d", New: func() Logic { return probe }})
	if err != nil {
		t.Fatal(err)
	}
	<-childEntered
	return rt, mux, probe, releaseChild
}

// mustOpen opens stream id on mux.
func mustOpen(t *testing.T, mux *Mux, id string) *MuxStream {
	t.Helper()
	s, err := mux.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// queued returns what s has queued, each frame as name gives it, without
// waiting: once the duplex's mailbox is drained, everything it emitted is
// there.
func queued(t *testing.T, s *MuxStream, name func(*messages.Frame) string) []string {
	t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var got []string
	for {
		f, err := s.Recv(done)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("stream %s: Recv: %v after %q", s.ID(), err, got)
			}
			return got
		}
		got = append(got, name(f))
	}
}

func holdingChild(t *testing.T) (spec Spec, entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(out) })
	t.Cleanup(release)
	return Duplex("k", func(*messages.Frame, func(*messages.Frame)) {
		close(in)
		<-out
	}), in, release
}

// TestMux_NewStreamOnStoppingDuplex: a Mux stream opened while its
// duplex is stopping gets ERROR and END for its first frame at once, and
// then, once the duplex has stopped, ErrDuplexStopped.
func TestMux_NewStreamOnStoppingDuplex(t *testing.T) {
	rt, mux, _, releaseChild := startHeldMux(t)
	rt.System().Root.Stop(mux.pid)

	s, err := mux.Open("n")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.SendAll(messages.Text("n", "late"), messages.Text("n", "again")); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	var got []string
	for len(got) < 2 {
		f, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv on a stream opened while the duplex stops: %v after %q, want ERROR and END", err, got)
		}
		got = append(got, frameName(f)+"["+f.GetMeta().GetFailureKind()+"]")
	}
	if want := []string{"ERROR(" + stoppingText + ")[" + StoppedKind + "]", "END[]"}; !slices.Equal(got, want) {
		t.Errorf("the stream got %q, want %q", got, want)
	}
	releaseChild()
	if f, err := s.Recv(ctx); !errors.Is(err, ErrDuplexStopped) {
		t.Errorf("Recv once the duplex stopped: %v, %v; want ErrDuplexStopped and nothing more", f, err)
	}
}

// TestShell_ParentSendsToStoppingChild: a parent that stops its child
// and writes it a call at once gets the call refused (ERROR and END from
// the child, stopping while its own child finishes), and then the
// child's ChildStopped.
func TestShell_ParentSendsToStoppingChild(t *testing.T) {
	rt := startRuntime(t)
	probe := &stopProbe{entered: make(chan *mailbox, 1), release: make(chan struct{})}
	var grandchildEntered <-chan struct{}
	var releaseGrandchild func()
	probe.child, grandchildEntered, releaseGrandchild = holdingChild(t)
	got := make(chan string, 8)
	ref, err := rt.Spawn(Spec{Name: "p", New: func() Logic {
		var d Ref
		return LogicFunc(func(c Context, msg any) {
			switch m := msg.(type) {
			case Started:
				var err error
				if d, err = c.Spawn(Spec{Name: "d", New: func() Logic { return probe }}); err != nil {
					c.Fail(err)
				}
			case *messages.Frame:
				c.Stop(d)
				c.Send(d, messages.Text("n", "late"))
			case ChildFrame:
				got <- m.Frame.GetStreamId() + ":" + frameName(m.Frame)
			case ChildStopped:
				got <- "STOPPED"
			}
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-grandchildEntered
	rt.Send(ref, messages.Text("s", "go"))
	ctx := testContext(t)
	seen := untilStopped(t, ctx, got, func(s string) {
		if s == "n:END" {
			releaseGrandchild() // refused while stopping: now let it stop
		}
	})
	if want := []string{"n:ERROR(" + stoppingText + ")", "n:END", "STOPPED"}; !slices.Equal(seen, want) {
		t.Errorf("the parent got %q, want %q", seen, want)
	}
}

// testContext bounds a wait that only a failing test would make long: a
// wait for what must come (the duplex's stop), never a measure of speed.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// untilStopped returns what got brings up to and including "STOPPED",
// calling each (unless nil) on every record as it comes; it fails t when
// ctx ends first.
func untilStopped(t *testing.T, ctx context.Context, got <-chan string, each func(string)) []string {
	t.Helper()
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "STOPPED" {
		select {
		case s := <-got:
			seen = append(seen, s)
			if each != nil {
				each(s)
			}
		case <-ctx.Done():
			t.Fatalf("the parent got %q and then nothing", seen)
		}
	}
	return seen
}
