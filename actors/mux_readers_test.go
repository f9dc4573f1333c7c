package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_CloseWakesEveryReader: Close ends the wait of every reader of
// the stream, not only the one its signal reaches.
func TestMux_CloseWakesEveryReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newBareMux()
		s, err := m.Open("s")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		for range 2 {
			go func() { _, err := s.Recv(context.Background()); done <- err }()
		}
		synctest.Wait() // both wait
		s.Close()
		synctest.Wait()
		for i := range 2 {
			select {
			case err := <-done:
				if !errors.Is(err, ErrStreamClosed) {
					t.Errorf("reader %d: %v, want ErrStreamClosed", i, err)
				}
			default:
				t.Fatalf("reader %d still waits after Close", i)
			}
		}
	})
}

// TestMux_TwoReadersTwoFrames: two readers wait, two frames come: each
// reader gets one, though notify holds a single signal.
func TestMux_TwoReadersTwoFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newBareMux()
		s, err := m.Open("s")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *messages.Frame, 2)
		for range 2 {
			go func() {
				f, err := s.Recv(context.Background())
				if err != nil {
					t.Error(err)
				}
				done <- f
			}()
		}
		synctest.Wait()
		m.in.SendUserMessage(nil, messages.Text("s", "1"))
		m.in.SendUserMessage(nil, messages.Text("s", "2"))
		synctest.Wait()
		got := map[string]bool{}
		for i := range 2 {
			select {
			case f := <-done:
				got[f.GetText()] = true
			default:
				t.Fatalf("reader %d still waits with a frame queued", i)
			}
		}
		if !got["1"] || !got["2"] {
			t.Errorf("readers got %v, want frames 1 and 2", got)
		}
		s.Close()
	})
}

// TestMux_LateSignalNotOnReusedChannel: a frame delivered to a stream
// just as it closes (its wake decided, the stream closed before the frame
// is queued) neither reaches the stream opened next on the same channel
// nor signals it: that stream's END-only reader stays asleep until END.
func TestMux_LateSignalNotOnReusedChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newBareMux()
		inWake, release := make(chan struct{}), make(chan struct{})
		old, err := m.OpenWake("old", func(*messages.Frame) bool { close(inWake); <-release; return true })
		if err != nil {
			t.Fatal(err)
		}
		go m.in.SendUserMessage(nil, messages.Text("old", "x"))
		<-inWake
		old.Close()
		isEnd := func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END }
		s, err := m.OpenWake("new", isEnd)
		if err != nil {
			t.Fatal(err)
		}
		if s.p.notify != old.p.notify {
			t.Fatal("the closed stream's channel was not reused: the test no longer looks at what it is about")
		}
		got := make(chan *messages.Frame, 1)
		go func() { f, _ := s.Recv(context.Background()); got <- f }()
		synctest.Wait()
		m.in.SendUserMessage(nil, messages.Text("new", "not END")) // queued, wakes nobody
		close(release)                                             // the old stream's late frame goes on
		synctest.Wait()
		select {
		case f := <-got:
			t.Fatalf("the new stream's END-only reader woke early, reading %q", f.GetText())
		default:
		}
		m.in.SendUserMessage(nil, messages.End("new"))
		synctest.Wait()
		if f := <-got; f.GetText() != "not END" {
			t.Errorf("the new stream read %q first, want its own frame", f.GetText())
		}
		s.Close()
	})
}
