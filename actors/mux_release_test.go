package actors

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_ReleasedStreamIsReused checks that a stream released is the
// next one opened, with none of the old stream's frames, signal or wake:
// opening and releasing a stream then allocates nothing.
func TestMux_ReleasedStreamIsReused(t *testing.T) {
	m := newBareMux()
	old, err := m.OpenWake("a", isEndFrame)
	if err != nil {
		t.Fatal(err)
	}
	// Frames left unread, END's signal not taken.
	m.in.SendUserMessage(nil, messages.Text("a", "unread"))
	m.in.SendUserMessage(nil, messages.End("a"))
	old.Release()
	s, err := m.Open("b")
	if err != nil {
		t.Fatal(err)
	}
	if s != old {
		t.Fatal("the stream opened after a Release is not the released one")
	}
	if s.ID() != "b" || len(s.p.queue) != 0 || len(s.p.notify) != 0 || s.p.wake != nil {
		t.Fatalf("the reused stream kept the old one's state: id %q, %d frames, %d signals, wake set %v",
			s.ID(), len(s.p.queue), len(s.p.notify), s.p.wake != nil)
	}
	m.in.SendUserMessage(nil, messages.Text("a", "late"))
	m.in.SendUserMessage(nil, messages.Text("b", "new"))
	if f, err := s.Recv(context.Background()); err != nil || f.GetText() != "new" {
		t.Fatalf("the reused stream read %q, %v; want \"new\"", f.GetText(), err)
	}
	s.Release()
	allocs := testing.AllocsPerRun(100, func() {
		s, err := m.OpenWake("s", nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	})
	if allocs != 0 {
		t.Fatalf("a stream opened and released allocates %v times, want 0", allocs)
	}
}

func isEndFrame(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END }

// TestMux_ReleaseAfterCloseOrTwice checks that a stream is given to a
// new one only once: a Release after Close, a second Release and a Close
// after Release leave the stream opened since alone.
func TestMux_ReleaseAfterCloseOrTwice(t *testing.T) {
	m := newBareMux()
	closed, _ := m.Open("c")
	closed.Close()
	closed.Release()
	released, _ := m.Open("r")
	if released == closed {
		t.Fatal("a stream released after Close was reused")
	}
	released.Release()
	released.Release()
	released.Close()
	a, _ := m.Open("a")
	b, _ := m.Open("b")
	if a != released || b == released {
		t.Fatalf("a stream released twice served %v and %v, want the first only", a == released, b == released)
	}
	m.in.SendUserMessage(nil, messages.Text("a", "kept"))
	if f, err := a.Recv(context.Background()); err != nil || f.GetText() != "kept" {
		t.Fatalf("the stream reused read %q, %v after a Close of its old handle", f.GetText(), err)
	}
}

// TestMux_ReleaseWithWaitingReaderCloses checks that a Release while a
// Recv waits is a Close: the reader returns ErrStreamClosed and the
// stream is not reused.
func TestMux_ReleaseWithWaitingReaderCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newBareMux()
		s, _ := m.Open("s")
		done := make(chan error, 1)
		go func() {
			_, err := s.Recv(context.Background())
			done <- err
		}()
		synctest.Wait()
		s.Release()
		if err := <-done; !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("a reader waiting at Release got %v, want ErrStreamClosed", err)
		}
		if next, _ := m.Open("t"); next == s {
			t.Fatal("a stream released with a reader waiting was reused")
		}
	})
}

// TestMux_ReusedStreamGetsNoFrameOfItsOldID checks, with frames of a
// stream handed to the Mux all the while (each waking its reader), that
// the stream opened next on its channel (after Close) or as itself (after
// Release) under another id never gets one of them nor their signal: a
// frame looked up before the Close or Release is handed over before it,
// not after.
func TestMux_ReusedStreamGetsNoFrameOfItsOldID(t *testing.T) {
	for _, done := range []struct {
		name string
		end  func(*MuxStream)
	}{{"close", (*MuxStream).Close}, {"release", (*MuxStream).Release}} {
		t.Run(done.name, func(t *testing.T) {
			m := newBareMux()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the duplex, emitting frames of stream "old"
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					m.in.SendUserMessage(nil, messages.Text("old", strconv.Itoa(i)))
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			for range 2000 {
				s, err := m.Open("old")
				if err != nil {
					t.Fatal(err)
				}
				done.end(s)
				n, err := m.OpenWake("new", isEndFrame)
				if err != nil {
					t.Fatal(err)
				}
				n.p.mu.Lock()
				frames, signals := len(n.p.queue), len(n.p.notify)
				n.p.mu.Unlock()
				if frames != 0 || signals != 0 {
					t.Fatalf("the stream opened as \"new\" got %d frame(s) and %d signal(s) of \"old\"", frames, signals)
				}
				done.end(n)
			}
		})
	}
}

// TestMuxStream_RecvAll checks that RecvAll waits for a frame as Recv
// does and returns it with every frame queued behind it, in order,
// appended to dst; that the stream then reads on from an empty queue; and
// that an error leaves dst as it was.
func TestMuxStream_RecvAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newBareMux()
		s, err := m.OpenWake("s", isEndFrame)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		got := make(chan []*messages.Frame, 1)
		go func() {
			frames, err := s.RecvAll(ctx, []*messages.Frame{messages.Text("x", "kept")})
			if err != nil {
				t.Error(err)
			}
			got <- frames
		}()
		synctest.Wait() // waiting: nothing queued
		for _, text := range []string{"1", "2", "3"} {
			m.in.SendUserMessage(nil, messages.Text("s", text))
		}
		m.in.SendUserMessage(nil, messages.End("s"))
		frames := <-got
		if want := []string{"kept", "1", "2", "3", "<END>"}; !slices.Equal(frameTexts(frames), want) {
			t.Fatalf("RecvAll read %q, want %q", frameTexts(frames), want)
		}
		m.in.SendUserMessage(nil, messages.Text("s", "4"))
		m.in.SendUserMessage(nil, messages.End("s"))
		if frames, err := s.RecvAll(ctx, nil); err != nil || !slices.Equal(frameTexts(frames), []string{"4", "<END>"}) {
			t.Fatalf("the next RecvAll read %q, %v; want the frames queued since", frameTexts(frames), err)
		}
		s.Close()
		dst := []*messages.Frame{messages.Text("x", "kept")}
		if frames, err := s.RecvAll(ctx, dst); !errors.Is(err, ErrStreamClosed) || len(frames) != 1 {
			t.Fatalf("RecvAll on a closed stream: %d frames, %v; want dst unchanged and ErrStreamClosed", len(frames), err)
		}
	})
}

func frameTexts(frames []*messages.Frame) []string {
	var out []string
	for _, f := range frames {
		if f.GetType() == messages.FrameType_END {
			out = append(out, "<END>")
		} else {
			out = append(out, f.GetText())
		}
	}
	return out
}

// TestMux_ReleasedStreamKeepsNoFrames checks that a stream in the Mux's
// free list holds none of the frames it was given: a run of more frames
// than the stream's own room moves its queue to a bigger array and
// leaves the room's slots pointing at the first frames, which a released
// stream would otherwise keep alive (with their payloads) until reused.
func TestMux_ReleasedStreamKeepsNoFrames(t *testing.T) {
	m := newBareMux()
	s, err := m.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range muxStreamRoom + 1 {
		m.in.SendUserMessage(nil, messages.Text("a", strconv.Itoa(i)))
	}
	got, err := s.RecvAll(context.Background(), nil)
	if err != nil || len(got) != muxStreamRoom+1 {
		t.Fatalf("RecvAll: %d frames, %v; want %d", len(got), err, muxStreamRoom+1)
	}
	s.Release()
	if len(m.in.freeStreams) != 1 {
		t.Fatal("the stream was not released to the free list")
	}
	for i, f := range s.room {
		if f != nil {
			t.Fatalf("the released stream still holds frame %q in slot %d of its room", f.GetText(), i)
		}
	}
}

// TestMux_ReleasedStreamKeepsNoFramesRead checks the same of streams
// released with frames read one by one or in a batch, or not read,
// whether their queue stayed in the room or outgrew it.
func TestMux_ReleasedStreamKeepsNoFramesRead(t *testing.T) {
	for _, sent := range []int{0, 3, muxStreamRoom, muxStreamRoom + 1, 2*muxStreamRoom + 3} {
		for _, read := range []int{0, 1, sent / 2, sent, -1} { // -1: RecvAll
			if read > sent || (read == -1 && sent == 0) {
				continue
			}
			m := newBareMux()
			s, err := m.Open("a")
			if err != nil {
				t.Fatal(err)
			}
			for i := range sent {
				m.in.SendUserMessage(nil, messages.Text("a", strconv.Itoa(i)))
			}
			if read < 0 {
				if _, err := s.RecvAll(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
			}
			for range read {
				if _, err := s.Recv(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			s.Release()
			if len(m.in.freeStreams) != 1 {
				t.Fatalf("%d sent, %d read: the stream was not released to the free list", sent, read)
			}
			for i, f := range s.room {
				if f != nil {
					t.Fatalf("%d sent, %d read: the released stream still holds frame %q in slot %d of its room", sent, read, f.GetText(), i)
				}
			}
			if s.p.queue != nil {
				t.Fatalf("%d sent, %d read: the released stream keeps a queue of %d", sent, read, len(s.p.queue))
			}
		}
	}
}

// BenchmarkMux_Run is one run's stream as agent.Run uses it: opened to
// wake its reader at END only, a dozen frames handed over, read in one
// batch and the stream released for the next run.
func BenchmarkMux_Run(b *testing.B) {
	m := newBareMux()
	frames := make([]*messages.Frame, 12)
	for i := range frames[:11] {
		frames[i] = messages.Text("s", strconv.Itoa(i))
	}
	frames[11] = messages.End("s")
	isEnd := func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END }
	var room [muxStreamRoom]*messages.Frame
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := m.OpenWake("s", isEnd)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range frames {
			m.in.SendUserMessage(nil, f)
		}
		got, err := s.RecvAll(ctx, room[:0])
		if err != nil || len(got) != len(frames) {
			b.Fatalf("RecvAll: %d frames, %v", len(got), err)
		}
		s.Release()
	}
}
