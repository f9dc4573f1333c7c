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
