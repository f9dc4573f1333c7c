package cluster_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/cluster"
)

// heldMember starts a member whose session's call (of a Run, whose
// outcome goes to ran) ignores its context until release is called, and
// returns once that call runs: the member's close waits for it.
func heldMember(t *testing.T) (m *cluster.Member, ran chan error, release func()) {
	t.Helper()
	started, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	m, err := cluster.Start(&cluster.Options{
		Provider: loneProvider(t),
		Store:    openStore(t, freshSchema()),
		Session: sessionFunc(t, 1, newSideFile(t), func(string) hooks {
			return hooks{before: func(context.Context, string) {
				once.Do(func() { close(started) })
				<-held // deaf to its context: the member's close waits for it
			}}
		}),
		Hold: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ran = make(chan error, 1)
	go func() {
		_, err := m.Run(context.Background(), "s", firstRequest("s")...)
		ran <- err
	}()
	select {
	case <-started:
	case err := <-ran:
		t.Fatalf("Run ended before the session's call ran: %v", err)
	}
	return m, ran, release
}

// TestMember_CloseWhileClosingHonoursItsCtx: a Close that finds the
// member already closing (an earlier Close, or the leaving of a member
// the cluster excluded, which closes it with a deadline of its own) waits
// for that close only until its own ctx ends, and then returns an error
// wrapping ctx's; it does not wait, ctx ignored, until the close under
// way is done (here held by a session's call that ignores its context). A
// Close once the member has closed returns the close's outcome.
func TestMember_CloseWhileClosingHonoursItsCtx(t *testing.T) {
	leakCheck(t)
	m, ran, releaseOnce := heldMember(t)
	firstCtx, cancelFirst := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancelFirst()
	first := make(chan error, 1)
	go func() { first <- m.Close(firstCtx) }()
	// The first Close has begun once the Run returns ErrClosed.
	if err := <-ran; !errors.Is(err, cluster.ErrClosed) {
		t.Fatalf("Run when its member began to close: %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	second := make(chan error, 1)
	go func() { second <- m.Close(ctx) }()
	var err2 error
	select {
	case err2 = <-second:
	case err := <-first:
		t.Fatalf("the first Close returned (%v) while the session's call still held it", err)
	case <-time.After(time.Minute): // a bound on a hang, not a speed check
		releaseOnce()
		err2 = <-second
	}
	if !errors.Is(err2, context.Canceled) {
		t.Errorf("Close with a cancelled ctx while the member closes: %v, want an error wrapping context.Canceled", err2)
	}
	releaseOnce()
	if err := <-first; err != nil {
		t.Errorf("the first Close: %v", err)
	}
	if err := m.Close(ctx); err != nil {
		t.Errorf("Close once closed: %v, want the close's outcome (nil)", err)
	}
}

// TestMember_CloseAfterAnEarlierCloseGaveUpWaitsForTheClose: a first
// Close whose ctx ends while the close is held (by a session's call that
// ignores its context) returns an error wrapping ctx's, and the close goes
// on: a later Close with a fresh ctx waits for that close to be done and
// returns its outcome (nil), rather than the first Close's error at once.
func TestMember_CloseAfterAnEarlierCloseGaveUpWaitsForTheClose(t *testing.T) {
	leakCheck(t)
	m, ran, releaseOnce := heldMember(t)
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- m.Close(firstCtx) }()
	// The first Close has begun once the Run returns ErrClosed.
	if err := <-ran; !errors.Is(err, cluster.ErrClosed) {
		t.Fatalf("Run when its member began to close: %v, want ErrClosed", err)
	}
	cancelFirst()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first Close, its ctx cancelled while the session's call held the close: %v, want an error wrapping context.Canceled", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- m.Close(ctx) }()
	releaseOnce()
	if err := <-second; err != nil {
		t.Errorf("Close with a fresh ctx after the first gave up: %v, want it to wait for the close and return its outcome (nil)", err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("Close once closed: %v, want the close's outcome (nil)", err)
	}
}
