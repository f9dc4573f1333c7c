package actors_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/messages"
)

// TestMux_ReopenedStreamSkipsLateFrames checks, through a real duplex,
// that the answer to a frame sent on a stream which closed before the
// answer came is dropped: the stream opened again with the same id (and
// the closed stream's channel) reads only the answers to its own frames.
func TestMux_ReopenedStreamSkipsLateFrames(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := testCtx(t)
	mux, err := rt.StartMux(upper())
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		s, err := mux.OpenWake("s", func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END })
		if err != nil {
			t.Fatal(err)
		}
		want := "R" + strconv.Itoa(round)
		// "late" is answered after the stream closes, or just before.
		if err := s.SendAll(messages.Text("s", "r"+strconv.Itoa(round)), messages.End("s"), messages.Text("s", "late")); err != nil {
			t.Fatal(err)
		}
		var got []*messages.Frame
		for len(got) < 2 {
			f, err := s.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f)
		}
		if !slices.Equal(texts(got), []string{want, "<END>"}) {
			t.Fatalf("round %d read %q", round, texts(got))
		}
		s.Close()
		// The duplex answers in order: once "sync" is answered, "late"
		// was answered and routed (dropped) before the id is reused.
		syncStream, err := mux.Open("sync")
		if err != nil {
			t.Fatal(err)
		}
		if err := syncStream.Send(messages.Text("sync", "sync")); err != nil {
			t.Fatal(err)
		}
		if f, err := syncStream.Recv(ctx); err != nil || f.GetText() != "SYNC" {
			t.Fatalf("sync read %q, %v", f.GetText(), err)
		}
		syncStream.Close()
	}
	if err := mux.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMux_ConcurrentStreamsReuse runs streams opened and closed by
// several goroutines at once on one Mux, each closing its stream while
// the duplex still answers it, so that the channels of closed streams
// serve others: each stream reads exactly the answers to its own frames.
func TestMux_ConcurrentStreamsReuse(t *testing.T) {
	rt := newRuntime(t, nil)
	ctx := testCtx(t)
	mux, err := rt.StartMux(upper())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for round := range 25 {
				id := "g" + strconv.Itoa(g) + "-" + strconv.Itoa(round)
				s, err := mux.OpenWake(id, func(f *messages.Frame) bool { return f.GetType() == messages.FrameType_END })
				if err != nil {
					errs <- err
					return
				}
				if err := s.SendAll(messages.Text(id, id), messages.Text(id, "x"), messages.End(id), messages.Text(id, "late")); err != nil {
					errs <- err
					return
				}
				var got []*messages.Frame
				for len(got) < 3 {
					f, err := s.Recv(ctx)
					if err != nil {
						errs <- err
						return
					}
					got = append(got, f)
				}
				s.Close()
				if want := []string{strings.ToUpper(id), "X", "<END>"}; !slices.Equal(texts(got), want) {
					errs <- errors.New("stream " + id + " read " + strconv.Quote(texts(got)[0]) + "…, want " + strconv.Quote(want[0]))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := mux.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mux.Open("after"); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("Open after Close: %v, want ErrDuplexStopped", err)
	}
}
