package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/models"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/tools"
)

// TestSharedLoop_StartRetriedAfterFailure: a start of the shared loop
// that failed is reported to its Run, and the next Run starts the loop
// again; once started, it is not started anew.
func TestSharedLoop_StartRetriedAfterFailure(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	a := helloAgent(t, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		if err := a.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	boom := errors.New("injected start failure")
	var starts atomic.Int32
	start := a.startShared
	a.startShared = func(spec actors.Spec) (*actors.Mux, error) {
		if starts.Add(1) == 1 {
			return nil, boom
		}
		return start(spec)
	}
	msgs := []models.Message{models.UserMessage("Hello?")}
	if _, err := a.Run(ctx, "s1", msgs); !errors.Is(err, boom) || !strings.Contains(err.Error(), `agent "agent": start its loop`) {
		t.Fatalf("first run: %v, want the start's failure naming the agent", err)
	}
	for _, id := range []string{"s2", "s3"} {
		if ans, err := a.Run(ctx, id, msgs); err != nil || ans.Text != "Hello." {
			t.Fatalf("run %s: %+v, %v", id, ans, err)
		}
	}
	if n := starts.Load(); n != 2 {
		t.Fatalf("%d starts, want 2: the failed one and the one serving both later runs", n)
	}
}

// TestSharedLoop_OneStartForConcurrentCallers: callers that need the
// shared loop while its start is under way make no start of their own:
// they wait for that one and each gets its result, an error included
// (a caller whose ctx ends stops waiting); the next caller after a
// failure starts again, and a started loop is kept.
func TestSharedLoop_OneStartForConcurrentCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		boom := errors.New("injected start failure")
		release := make(chan struct{})
		var starts atomic.Int32
		a := &Agent{opts: Options{Name: "solo"}}
		a.startShared = func(actors.Spec) (*actors.Mux, error) {
			starts.Add(1)
			<-release
			return nil, boom
		}
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := a.sharedLoop(context.Background())
				errs <- err
			}()
		}
		synctest.Wait() // one caller is in the start: the next one waits for it
		impatient, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan error, 1)
		go func() {
			_, err := a.sharedLoop(impatient)
			gaveUp <- err
		}()
		synctest.Wait() // every caller waits: in the start, or for it
		if got := starts.Load(); got != 1 {
			t.Fatalf("%d starts by %d concurrent callers, want 1", got, n+1)
		}
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("caller whose ctx ended: %v, want context.Canceled", err)
		}
		close(release)
		for range n {
			if err := <-errs; !errors.Is(err, boom) || !strings.Contains(err.Error(), `agent "solo": start its loop`) {
				t.Fatalf("caller of the failed start: %v, want its error naming the agent", err)
			}
		}
		loop := &actors.Mux{}
		a.startShared = func(actors.Spec) (*actors.Mux, error) {
			starts.Add(1)
			return loop, nil
		}
		for range 2 {
			if mux, err := a.sharedLoop(context.Background()); mux != loop || err != nil {
				t.Fatalf("after the failed start: %p, %v, want the loop started anew", mux, err)
			}
		}
		if got := starts.Load(); got != 2 {
			t.Fatalf("%d starts, want 2: the failed one, then one kept", got)
		}
	})
}

// TestResume_EndedWhileLoopStartsKeepsWaiting: without a Store, a Resume
// whose ctx ends while it waits for the shared loop's start returns ctx's
// error, and the session it took off the waiting ones is put back, its
// held stream with it: nothing was sent on it, so a later Resume goes on.
func TestResume_EndedWhileLoopStartsKeepsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := actorstest.NewRuntime(t, nil)
		m := scripted.MustNew(scripted.Script{Select: scripted.ByConversation, Turns: []scripted.Turn{
			{Text: "Launch.", ToolCalls: []scripted.ToolCall{{ID: "c1", Name: "launch", Arguments: `{}`}}},
			{Text: "Done."},
		}}, nil)
		launch := tools.MustNewTyped(tools.Definition{Name: "launch", Capabilities: []string{"execute"}, Irreversible: true},
			func(context.Context, struct{}) (string, error) { return "launched", nil })
		a, err := New(rt, m.Spec("model"), &Options{Tools: []*tools.Tool{launch}, Approval: &tools.ApprovalOptions{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		defer func() {
			if err := a.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
		msgs := []models.Message{models.UserMessage("Launch?")}
		var w *WaitingError
		if _, err := a.Run(ctx, "s1", msgs); !errors.As(err, &w) {
			t.Fatalf("Run: %v, want a wait for approval", err)
		}
		started, ready := a.shared, a.ready
		a.shared, a.ready = &loopStart{done: make(chan struct{})}, nil // a start under way
		impatient, cancel := context.WithCancel(ctx)
		errs := make(chan error, 1)
		go func() {
			_, err := a.Resume(impatient, "s1", msgs, Approve("c1"))
			errs <- err
		}()
		synctest.Wait() // the Resume waits for the start
		cancel()
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("Resume whose ctx ended: %v, want context.Canceled", err)
		}
		if got := a.Waiting(); len(got) != 1 || got[0] != "s1" {
			t.Fatalf("waiting sessions %v, want [s1]", got)
		}
		a.shared, a.ready = started, ready
		if ans, err := a.Resume(ctx, "s1", msgs, Approve("c1")); err != nil || ans.Text != "Done." {
			t.Fatalf("later Resume: %v, %+v", err, ans)
		}
	})
}

// TestSharedLoop_StartedWinsOverEndedCtx: a caller whose ctx has ended
// gets the shared loop all the same once it is started (each try: a
// select between the two must not pick the ctx by chance).
func TestSharedLoop_StartedWinsOverEndedCtx(t *testing.T) {
	loop := &actors.Mux{}
	a := &Agent{opts: Options{Name: "solo"}, startShared: func(actors.Spec) (*actors.Mux, error) { return loop, nil }}
	if mux, err := a.sharedLoop(context.Background()); mux != loop || err != nil {
		t.Fatalf("start: %p, %v", mux, err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for try := range 64 {
		if mux, err := a.sharedLoop(ended); mux != loop || err != nil {
			t.Fatalf("try %d with an ended ctx: %p, %v, want the started loop", try, mux, err)
		}
	}
}
