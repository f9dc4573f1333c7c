package actors_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/actors/actorstest"
)

// slowStopLogic's end takes until release; ended is set once it is over.
type slowStopLogic struct {
	release <-chan struct{}
	ended   *atomic.Bool
}

func (slowStopLogic) Receive(actors.Context, any) {}

func (l slowStopLogic) OnFailure(actors.Context, error) {
	<-l.release
	if l.ended != nil {
		l.ended.Store(true)
	}
}

// slowStop is a duplex whose stop takes until the returned release is
// called: its child's end waits for it (its own mailbox stays free, so
// protoactor answers a Watch of it at once with Terminated while it
// stops). ended is set once the child's end is over.
func slowStop(t *testing.T) (spec actors.Spec, release func(), ended *atomic.Bool) {
	ch := make(chan struct{})
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	ended = new(atomic.Bool)
	child := actors.Spec{Name: "end", New: func() actors.Logic { return slowStopLogic{release: ch, ended: ended} }}
	return actors.Spec{Name: "slow", New: func() actors.Logic {
		return actors.LogicFunc(func(c actors.Context, msg any) {
			if _, ok := msg.(actors.Started); ok {
				if _, err := c.Spawn(child); err != nil {
					c.Fail(err)
				}
			}
		})
	}}, release, ended
}

// closer is a Mux, a Conn or a Runtime.
type closer interface{ Close(context.Context) error }

// closers start the duplex spec and return what closes it: a Mux, a
// Conn, or the runtime itself.
var closers = []struct {
	name  string
	start func(*actors.Runtime, actors.Spec) (closer, error)
}{
	{"Mux", func(rt *actors.Runtime, spec actors.Spec) (closer, error) { return rt.StartMux(spec) }},
	{"Conn", func(rt *actors.Runtime, spec actors.Spec) (closer, error) { return rt.Start(spec) }},
	{"Runtime", func(rt *actors.Runtime, spec actors.Spec) (closer, error) {
		_, err := rt.Start(spec)
		return rt, err
	}},
}

// startSlow starts a slowStop duplex with start in a runtime of its own
// (within t's bubble).
func startSlow(t *testing.T, start func(*actors.Runtime, actors.Spec) (closer, error)) (c closer, release func(), ended *atomic.Bool) {
	rt := actorstest.NewRuntime(t, nil)
	spec, release, ended := slowStop(t)
	c, err := start(rt, spec)
	if err != nil {
		t.Fatal(err)
	}
	return c, release, ended
}

// TestClose_WaitsAsLongAsItsCtx: Close "waits until it is gone or ctx
// ends": a duplex taking 20 s to stop, and a minute given, Close returns
// nil once it is gone, not protoactor's StopFuture timeout (10 s, fixed)
// while its ctx is still live (Runtime.Close would then shut the system
// down under the stopping duplex).
func TestClose_WaitsAsLongAsItsCtx(t *testing.T) {
	for _, tc := range closers {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, release, ended := startSlow(t, tc.start)
				time.AfterFunc(20*time.Second, release)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				if err := c.Close(ctx); err != nil {
					t.Errorf("Close with a minute, duplex stopping in 20 s: %v after %v; want nil after 20 s", err, time.Since(start))
				}
				if !ended.Load() {
					t.Error("Close returned before the duplex was gone")
				}
			})
		})
	}
}

// TestClose_SecondCloseWaitsWhileStopping: a Close after one whose ctx
// ended, the duplex still stopping, waits until the duplex is gone: a
// caller that gave up once can wait for it so. (Runtime.Close returns
// its first call's result.)
func TestClose_SecondCloseWaitsWhileStopping(t *testing.T) {
	for _, tc := range closers[:2] {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, release, ended := startSlow(t, tc.start)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("first Close, the duplex's stop held: %v; want its ctx's deadline", err)
				}
				second := make(chan error, 1)
				go func() { second <- c.Close(context.Background()) }()
				synctest.Wait()
				select {
				case err := <-second:
					t.Errorf("second Close returned %v while the duplex was still stopping; want it to wait until it is gone", err)
					release()
					return
				default:
				}
				release()
				if err := <-second; err != nil {
					t.Errorf("second Close: %v", err)
				}
				if !ended.Load() {
					t.Error("second Close returned before the duplex was gone")
				}
			})
		})
	}
}
