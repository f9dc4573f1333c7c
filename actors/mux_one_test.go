package actors

import (
	"context"
	"errors"
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// handOver sends f to m's process on a goroutine and calls check while
// the frame is in the wake of its stream (blocked there), then lets it
// finish; it returns once the frame is handed over. The stream's wake
// must be the one handOver returns.
func handOver(m *Mux, f *messages.Frame, check func()) {
	inWake, release := make(chan struct{}), make(chan struct{})
	wake := func(*messages.Frame) bool { close(inWake); <-release; return true }
	s, err := m.OpenWake(f.GetStreamId(), wake)
	if err != nil {
		panic(err)
	}
	delivered := make(chan struct{})
	go func() { m.in.SendUserMessage(nil, f); close(delivered) }()
	<-inWake
	check()
	close(release)
	<-delivered
	if got, err := s.Recv(context.Background()); err != nil || got != f {
		panic("the frame handed over was not read")
	}
	s.Release()
}

// TestMux_FrameHandedOverUnderStreamLock checks what makes a released
// stream safe to reuse: a frame is handed to its stream with the
// stream's lock held, which Release and Open take, and only while the
// stream is routed under the frame's id; the only stream open gets its
// frames without the Mux's lock (an agent's one session, frame after
// frame), the others with it.
func TestMux_FrameHandedOverUnderStreamLock(t *testing.T) {
	m := newBareMux()
	handOver(m, messages.Text("one", "x"), func() {
		s := m.in.one.Load()
		if s == nil || s.mu.TryLock() {
			t.Error("a frame is handed to the only open stream without its lock: a Release could come in between")
			if s != nil {
				s.mu.Unlock()
			}
		}
		if !m.in.mu.TryLock() {
			t.Error("a frame is handed to the only open stream with the Mux's lock held")
			return
		}
		m.in.mu.Unlock()
	})
	first, err := m.Open("first") // the stream beside which the next is mapped
	if err != nil {
		t.Fatal(err)
	}
	handOver(m, messages.Text("mapped", "y"), func() {
		p := m.in.streams["mapped"]
		if p == nil || p.mu.TryLock() {
			t.Error("a frame is handed to a stream of the map without its lock")
			if p != nil {
				p.mu.Unlock()
			}
		}
	})
	first.Release()
}

// TestPort_DeliverChecksRoute: a frame looked up for a stream before its
// Release, and handed over once the stream is open again under another
// id, is refused; under the same id it is taken.
func TestPort_DeliverChecksRoute(t *testing.T) {
	m := newBareMux()
	s, err := m.Open("old")
	if err != nil {
		t.Fatal(err)
	}
	p := s.p
	s.Release()
	if p.deliver("old", messages.Text("old", "released")) {
		t.Fatal("a released stream took a frame")
	}
	again, err := m.Open("new")
	if err != nil {
		t.Fatal(err)
	}
	if again.p != p {
		t.Fatal("the released stream was not reused")
	}
	if p.deliver("old", messages.Text("old", "late")) || len(p.queue) != 0 || len(p.notify) != 0 {
		t.Fatalf("a frame of the old id reached the stream open as \"new\": %d frames, %d signals", len(p.queue), len(p.notify))
	}
	if !p.deliver("new", messages.Text("new", "x")) {
		t.Fatal("the stream refused a frame of its own id")
	}
	again.Release()
}

// TestMux_StreamsBesideTheFirst checks the routing as the only stream
// open (kept outside the Mux's map) and the streams opened beside it
// come and go: each stream gets its own frames, an id open either way
// cannot be opened twice, and a released stream gets none.
func TestMux_StreamsBesideTheFirst(t *testing.T) {
	m := newBareMux()
	ctx := context.Background()
	read := func(s *MuxStream, want string) {
		t.Helper()
		if f, err := s.Recv(ctx); err != nil || f.GetText() != want {
			t.Fatalf("stream %q read %q, %v; want %q", s.ID(), f.GetText(), err, want)
		}
	}
	send := func(ids ...string) {
		for _, id := range ids {
			m.in.SendUserMessage(nil, messages.Text(id, id))
		}
	}
	a, _ := m.Open("a") // the only one
	b, _ := m.Open("b") // beside it
	for _, id := range []string{"a", "b"} {
		if _, err := m.Open(id); !errors.Is(err, ErrStreamOpen) {
			t.Fatalf("open %q twice: %v, want ErrStreamOpen", id, err)
		}
	}
	send("b", "a")
	read(a, "a")
	read(b, "b")
	aPort := a.p
	a.Release()
	c, _ := m.Open("c") // the only one again, b still beside it
	if c.p != aPort || m.in.one.Load() != aPort {
		t.Fatal("the stream opened after the only one was released is not the only one")
	}
	send("a", "c", "b")
	read(c, "c")
	read(b, "b")
	if len(c.p.queue) != 0 {
		t.Fatal("a frame of the released stream reached the one opened after it")
	}
	b.Release()
	send("b", "c", "c")
	read(c, "c")
	read(c, "c")
	if _, err := m.Open("c"); !errors.Is(err, ErrStreamOpen) {
		t.Fatalf("open \"c\" twice: %v, want ErrStreamOpen", err)
	}
	d, _ := m.Open("d") // beside c, in the map
	if m.in.one.Load() != c.p || m.in.streams["d"] != d.p {
		t.Fatal("a stream opened beside the only one is not in the map")
	}
	c.Close()
	send("c", "d")
	read(d, "d")
	if _, err := c.Recv(ctx); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("the closed stream read on: %v, want ErrStreamClosed", err)
	}
	d.Release()
	if m.in.one.Load() != nil || len(m.in.streams) != 0 || m.in.mapped.Load() != 0 {
		t.Fatal("streams still routed once every one was released or closed")
	}
}
