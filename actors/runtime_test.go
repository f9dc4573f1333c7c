package actors_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/messages"
	"github.com/polyweave/polyweave-go/supervisor"
)

func asError[T error](err error, target *T) bool { return errors.As(err, target) }

// newRuntime starts a runtime that the test closes, then checks that no
// goroutine is left behind.
func newRuntime(t *testing.T, opts *actors.RuntimeOptions) *actors.Runtime {
	return actorstest.NewRuntime(t, opts)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// upper is a duplex that upper-cases TEXT, passes END, and panics on the
// text "crash".
func upper() actors.Spec {
	return actors.Duplex("upper", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetText() == "crash" {
			panic("upper: asked to crash")
		}
		if f.GetType() == messages.FrameType_TEXT {
			emit(messages.Text(f.GetStreamId(), strings.ToUpper(f.GetText())))
			return
		}
		emit(f)
	})
}

func TestConn_WrapperRoundTrip(t *testing.T) {
	rt := newRuntime(t, nil)
	suffix := actors.Wrap("suffix", upper(), func() actors.Wrapped {
		return actors.Hooks{OnResponse: func(c actors.WrapperContext, f *messages.Frame) {
			if f.GetType() == messages.FrameType_TEXT {
				f = messages.Text(f.GetStreamId(), f.GetText()+"!")
			}
			c.ToOuter(f)
		}}
	})
	conn, err := rt.Start(suffix)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SendAll(messages.Text("s1", "a"), messages.Text("s1", "b"), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A!", "B!", "<END>"}; !slices.Equal(texts(got), want) {
		t.Fatalf("got %q, want %q", texts(got), want)
	}
}

// TestConn_PerStreamOrdering sends many streams from concurrent goroutines
// through a chain of wrappers and checks that each stream comes out whole
// and in order.
func TestConn_PerStreamOrdering(t *testing.T) {
	rt := newRuntime(t, nil)
	chain := upper()
	for i := range 3 {
		chain = actors.Wrap(fmt.Sprintf("w%d", i), chain, func() actors.Wrapped { return actors.Hooks{} })
	}
	conn, err := rt.Start(chain)
	if err != nil {
		t.Fatal(err)
	}
	const streams, perStream = 16, 200
	var wg sync.WaitGroup
	for s := range streams {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", s)
			for i := range perStream {
				if err := conn.Send(messages.Text(id, fmt.Sprintf("m%d", i))); err != nil {
					t.Error(err)
					return
				}
			}
			_ = conn.Send(messages.End(id))
		})
	}
	wg.Wait()
	got := map[string][]string{}
	ended := 0
	ctx := testCtx(t)
	for ended < streams {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d ended streams: %v", ended, err)
		}
		if f.GetType() == messages.FrameType_END {
			ended++
			continue
		}
		got[f.GetStreamId()] = append(got[f.GetStreamId()], f.GetText())
	}
	for s := range streams {
		id := fmt.Sprintf("s%d", s)
		if len(got[id]) != perStream {
			t.Fatalf("stream %s: %d frames, want %d", id, len(got[id]), perStream)
		}
		for i, text := range got[id] {
			if want := fmt.Sprintf("M%d", i); text != want {
				t.Fatalf("stream %s frame %d: %q, want %q", id, i, text, want)
			}
		}
	}
}

// TestSupervision_PanicMidStreamClosesStream: a panic in the inner duplex
// while a stream is open restarts it, and the consumer gets ERROR and END
// for that stream instead of waiting forever; later streams are served by
// the restarted duplex.
func TestSupervision_PanicMidStreamClosesStream(t *testing.T) {
	events := make(chan supervisor.Event, 10)
	rt := newRuntime(t, &actors.RuntimeOptions{OnSupervision: func(e supervisor.Event) { events <- e }})
	conn, err := rt.Start(actors.Wrap("wrapper", upper(), func() actors.Wrapped { return actors.Hooks{} }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := conn.SendAll(messages.Text("s1", "before"), messages.Text("s1", "crash"), messages.Text("s1", "lost")); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"BEFORE", "<ERROR>", "<END>"}; !slices.Equal(texts(got), want) {
		t.Fatalf("got %q, want %q", texts(got), want)
	}
	if msg := got[1].GetText(); !strings.Contains(msg, "asked to crash") {
		t.Errorf("error frame %q does not say why", msg)
	}
	if k := got[1].GetMeta().GetFailureKind(); k != "" {
		t.Errorf("the ERROR of a failed (not stopped) duplex has failure kind %q, want none", k)
	}
	select {
	case e := <-events:
		var pe *actors.PanicError
		if e.Directive != supervisor.Restart || !errors.As(e.Reason, &pe) {
			t.Errorf("event %+v, want a restart for a *PanicError", e)
		}
	case <-ctx.Done():
		t.Fatal("no supervision event")
	}
	// The restarted inner duplex serves the next stream.
	if err := conn.SendAll(messages.Text("s2", "after"), messages.End("s2")); err != nil {
		t.Fatal(err)
	}
	got, err = conn.RecvStream(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"AFTER", "<END>"}; !slices.Equal(texts(got), want) {
		t.Fatalf("after restart: got %q, want %q", texts(got), want)
	}
}

// TestSupervision_IntensityExceeded: once a duplex fails more often than
// its supervisor allows, the subtree is stopped, the decision is reported,
// and the consumer learns the duplex is gone.
func TestSupervision_IntensityExceeded(t *testing.T) {
	events := make(chan supervisor.Event, 100)
	strategy := supervisor.MustNew(&supervisor.Options{MaxRestarts: 2, Within: time.Minute})
	rt := newRuntime(t, &actors.RuntimeOptions{
		Supervision:   strategy,
		OnSupervision: func(e supervisor.Event) { events <- e },
	})
	conn, err := rt.Start(upper())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for i := range 3 {
		id := fmt.Sprintf("s%d", i)
		if err := conn.Send(messages.Text(id, "crash")); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		got, err := conn.RecvStream(ctx, id)
		if err != nil {
			t.Fatalf("stream %s: %v", id, err)
		}
		if want := []string{"<ERROR>", "<END>"}; !slices.Equal(texts(got), want) {
			t.Fatalf("stream %s: got %q, want %q", id, texts(got), want)
		}
	}
	var last supervisor.Event
	for range 3 {
		select {
		case last = <-events:
		case <-ctx.Done():
			t.Fatal("missing supervision events")
		}
	}
	if last.Directive != supervisor.Stop || !last.IntensityExceeded || last.Failures != 3 {
		t.Fatalf("third event %+v, want stop with intensity exceeded after 3 failures", last)
	}
	if _, err := conn.Recv(ctx); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("recv after stop: %v, want ErrDuplexStopped", err)
	}
	if err := conn.Send(messages.Text("late", "x")); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("send after stop: %v, want ErrDuplexStopped", err)
	}
}

// slowLogic starts background work for each frame and answers when it is
// done; the work blocks until its context is cancelled.
type slowLogic struct{ started chan<- struct{} }

func (l slowLogic) Receive(c actors.Context, msg any) {
	switch m := msg.(type) {
	case *messages.Frame:
		c.Go(m.GetStreamId(), func(ctx context.Context, _ func(any)) any {
			l.started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
	case actors.AsyncDone:
		c.Emit(messages.Text(m.Key.(string), fmt.Sprint(m.Value)))
	}
}

// TestRuntime_CloseStopsEverything: Close cancels background work, closes
// open streams with ERROR and END, and leaves no goroutine behind (checked
// by newRuntime's cleanup).
func TestRuntime_CloseStopsEverything(t *testing.T) {
	rt := newRuntime(t, nil)
	started := make(chan struct{}, 1)
	conn, err := rt.Start(actors.Spec{Name: "slow", New: func() actors.Logic { return slowLogic{started} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(messages.Text("s1", "go")); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := rt.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got, err := conn.RecvStream(testCtx(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"<ERROR>", "<END>"}; !slices.Equal(texts(got), want) {
		t.Fatalf("got %q, want %q", texts(got), want)
	}
	if !strings.Contains(got[0].GetText(), actors.ErrStopped.Error()) {
		t.Errorf("error frame %q, want it to say the duplex stopped", got[0].GetText())
	}
	if k := got[0].GetMeta().GetFailureKind(); k != actors.StoppedKind {
		t.Errorf("error frame's failure kind %q, want %q", k, actors.StoppedKind)
	}
	if _, err := rt.Start(upper()); !errors.Is(err, actors.ErrClosed) {
		t.Fatalf("start after close: %v, want ErrClosed", err)
	}
}

func TestPipeAndJoin(t *testing.T) {
	rt := newRuntime(t, nil)
	exclaim := actors.Duplex("exclaim", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() == messages.FrameType_TEXT {
			f = messages.Text(f.GetStreamId(), f.GetText()+"!")
		}
		emit(f)
	})
	pipe, err := rt.Start(actors.Pipe("pipe", upper(), exclaim))
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.SendAll(messages.Text("p", "x"), messages.End("p")); err != nil {
		t.Fatal(err)
	}
	got, err := pipe.RecvStream(testCtx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"X!", "<END>"}; !slices.Equal(texts(got), want) {
		t.Fatalf("pipe: got %q, want %q", texts(got), want)
	}

	join, err := rt.Start(actors.Join("join", upper(), exclaim))
	if err != nil {
		t.Fatal(err)
	}
	if err := join.Send(messages.Text("j", "y")); err != nil {
		t.Fatal(err)
	}
	var outs []string
	for range 2 {
		f, err := join.Recv(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, f.GetText())
	}
	slices.Sort(outs)
	if want := []string{"Y", "y!"}; !slices.Equal(outs, want) {
		t.Fatalf("join: got %q, want %q", outs, want)
	}
}

func TestConn_RecvHonoursContext(t *testing.T) {
	rt := newRuntime(t, nil)
	conn, err := rt.Start(upper())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := conn.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("recv with a cancelled context: %v", err)
	}
	if err := conn.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Recv(testCtx(t)); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("recv after close: %v, want ErrDuplexStopped", err)
	}
}

// TestSupervision_AllForOne: with an all-for-one strategy, one member of a
// join failing restarts its siblings too, and each closes its open stream.
func TestSupervision_AllForOne(t *testing.T) {
	events := make(chan supervisor.Event, 10)
	rt := newRuntime(t, &actors.RuntimeOptions{OnSupervision: func(e supervisor.Event) { events <- e }})
	second := upper()
	second.Name = "upper2" // siblings need distinct names
	join := actors.Join("join", upper(), second)
	join.Supervision = supervisor.MustNew(&supervisor.Options{Kind: supervisor.AllForOne})
	conn, err := rt.Start(join)
	if err != nil {
		t.Fatal(err)
	}
	// Both members get "crash"; whichever fails first restarts both.
	if err := conn.Send(messages.Text("s1", "crash")); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	select {
	case e := <-events:
		if len(e.Affected) != 2 || e.Directive != supervisor.Restart {
			t.Fatalf("event %+v, want a restart of both members", e)
		}
	case <-ctx.Done():
		t.Fatal("no supervision event")
	}
	var errs, ends int
	for ends < 1 {
		f, err := conn.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch f.GetType() {
		case messages.FrameType_ERROR:
			errs++
		case messages.FrameType_END:
			ends++
		}
	}
	if errs < 1 {
		t.Fatal("no ERROR before END")
	}
}

// TestShell_AnswersDoNotReopenStreams: a TOOL_RESULT written into a duplex
// after it ended a stream does not make the runtime close that stream
// again when the duplex stops.
func TestShell_AnswersDoNotReopenStreams(t *testing.T) {
	rt := newRuntime(t, nil)
	// Like a model adapter, it takes TOOL_RESULTs in without answering.
	model := actors.Duplex("model", func(f *messages.Frame, emit func(*messages.Frame)) {
		if f.GetType() != messages.FrameType_TOOL_RESULT {
			emit(f)
		}
	})
	conn, err := rt.Start(model)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := conn.SendAll(messages.Text("s1", "a"), messages.End("s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// A later stream, read back, shows the TOOL_RESULT was taken in
	// before the close (a stop does not wait for queued messages).
	if err := conn.SendAll(messages.RawToolResult("s1", "c1", "t", nil), messages.Text("s2", "b"), messages.End("s2")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RecvStream(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if f, err := conn.Recv(ctx); !errors.Is(err, actors.ErrDuplexStopped) {
		t.Fatalf("after close got %s, %v; want no frame (the stream was closed)", messages.Format(f), err)
	}
}
