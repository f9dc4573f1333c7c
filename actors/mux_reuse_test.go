package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/polyweave/polyweave-go/messages"
)

// newBareMux is a Mux with no duplex behind it: frames are handed to its
// process by the test, as the duplex would.
func newBareMux() *Mux { return &Mux{in: &muxProcess{streams: map[string]*port{}}} }

// TestMux_ReopenedStreamGetsNoOldFrames checks that a stream closed and
// opened again with the same id reuses the old stream's channel, reads
// none of the old stream's frames, and that a late frame delivered to the
// closed stream (looked up before it closed) is dropped, not handed to
// the stream that now has its channel.
func TestMux_ReopenedStreamGetsNoOldFrames(t *testing.T) {
	m := newBareMux()
	ctx := context.Background()
	old, err := m.Open("s")
	if err != nil {
		t.Fatal(err)
	}
	m.in.SendUserMessage(nil, messages.Text("s", "old"))
	oldPort := old.p
	old.Close()
	m.in.SendUserMessage(nil, messages.Text("s", "after close"))

	s, err := m.Open("s")
	if err != nil {
		t.Fatal(err)
	}
	if s.p.notify != oldPort.notify {
		t.Fatal("the reopened stream did not reuse the closed stream's channel")
	}
	if len(s.p.notify) != 0 {
		t.Fatal("the reused channel still held the old stream's signal")
	}
	oldPort.SendUserMessage(nil, messages.Text("s", "late"))
	if len(s.p.notify) != 0 || len(s.p.queue) != 0 {
		t.Fatalf("a late frame for the closed stream reached the new one: %d signals, %d frames", len(s.p.notify), len(s.p.queue))
	}
	m.in.SendUserMessage(nil, messages.Text("s", "new"))
	if f, err := s.Recv(ctx); err != nil || f.GetText() != "new" {
		t.Fatalf("the reopened stream read %q, %v; want \"new\"", f.GetText(), err)
	}
	// The closed stream still reads what was queued before Close, and
	// then learns it is closed instead of waiting.
	if f, err := old.Recv(ctx); err != nil || f.GetText() != "old" {
		t.Fatalf("the closed stream read %q, %v; want \"old\"", f.GetText(), err)
	}
	if _, err := old.Recv(ctx); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("the closed stream's last Recv: %v, want ErrStreamClosed", err)
	}
	old.Close() // twice: no second channel for the free list
	if len(m.in.free) != 0 {
		t.Fatalf("%d channels kept after a second Close of a stream whose channel is in use", len(m.in.free))
	}
}

// TestMux_CloseWakesWaitingReader checks that Close wakes a Recv waiting
// on the stream with ErrStreamClosed, and that the channel it waited on
// is not given to a stream opened later.
func TestMux_CloseWakesWaitingReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newBareMux()
		s, err := m.Open("s")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.Recv(context.Background())
			done <- err
		}()
		synctest.Wait() // the reader waits on the stream's channel
		s.Close()
		if err := <-done; !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("a reader waiting when the stream closed got %v, want ErrStreamClosed", err)
		}
		next, err := m.Open("s")
		if err != nil {
			t.Fatal(err)
		}
		if next.p.notify == s.p.notify {
			t.Fatal("the channel a reader waited on at Close was given to a new stream")
		}
	})
}

// TestMux_RecvCancelledLeavesChannelReusable checks that a Recv that
// returned on its context counts no more as a reader: the stream's
// channel is reused once the stream closes.
func TestMux_RecvCancelledLeavesChannelReusable(t *testing.T) {
	m := newBareMux()
	s, err := m.Open("s")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv with a cancelled context: %v", err)
	}
	s.Close()
	next, err := m.Open("t")
	if err != nil {
		t.Fatal(err)
	}
	if next.p.notify != s.p.notify {
		t.Fatal("the channel of a stream with no reader left was not reused")
	}
}

// TestMux_LastStreamCacheFollowsClose checks that the stream remembered
// for consecutive frames is forgotten when it closes: its frames are then
// dropped, and those of a stream reopened with its id reach the new one.
func TestMux_LastStreamCacheFollowsClose(t *testing.T) {
	m := newBareMux()
	ctx := context.Background()
	a, _ := m.Open("a")
	b, _ := m.Open("b")
	for _, id := range []string{"a", "a", "b", "a"} {
		m.in.SendUserMessage(nil, messages.Text(id, id))
	}
	if len(a.p.queue) != 3 || len(b.p.queue) != 1 {
		t.Fatalf("routed %d frames to a and %d to b, want 3 and 1", len(a.p.queue), len(b.p.queue))
	}
	a.Close()
	m.in.SendUserMessage(nil, messages.Text("a", "dropped"))
	if len(a.p.queue) != 3 {
		t.Fatal("a frame for a closed stream was queued")
	}
	again, _ := m.Open("a")
	m.in.SendUserMessage(nil, messages.Text("a", "again"))
	if f, err := again.Recv(ctx); err != nil || f.GetText() != "again" {
		t.Fatalf("the reopened stream read %q, %v", f.GetText(), err)
	}
}

// TestMux_StreamCostsOneAllocation checks that opening and closing a
// stream, the channel of the last one reused, allocates the stream alone.
func TestMux_StreamCostsOneAllocation(t *testing.T) {
	m := newBareMux()
	allocs := testing.AllocsPerRun(100, func() {
		s, err := m.OpenWake("s", nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	})
	if allocs != 1 {
		t.Fatalf("a stream opened and closed allocates %v times, want 1", allocs)
	}
}
