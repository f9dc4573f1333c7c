package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/messages"
)

// RunIncarnation runs one incarnation of session id in rt on a claim of it
// in store, as a member's session actor does, and returns its state
// ("done", "failed", "moved", "retry", "refused"), its text or error, and its
// claim's epoch.
func RunIncarnation(ctx context.Context, rt *actors.Runtime, store *pgstore.Store, fn SessionFunc, id string, request ...*messages.Frame) (state, text string, epoch uint64) {
	return RunIncarnationEpoch(ctx, rt, store, nil, DefaultRequestTimeout, fn, id, request...)
}

// RunIncarnationEpoch is RunIncarnation, where epoch (unless nil) stands
// for store's Epoch, and timeout for the member's RequestTimeout.
func RunIncarnationEpoch(ctx context.Context, rt *actors.Runtime, store *pgstore.Store, epoch func(context.Context, string) (uint64, error), timeout time.Duration, fn SessionFunc, id string, request ...*messages.Frame) (state, text string, epochOut uint64) {
	var params []param
	for _, f := range request {
		params = append(params, param{Name: f.GetName(), Value: f.GetPayload()})
	}
	var s sessionStore = store
	if epoch != nil {
		s = epochStore{store, epoch}
	}
	st, claim := runSession(ctx, rt, s, timeout, fn, id, params, nil)
	if claim != nil {
		epochOut = claim.Epoch()
	}
	if st.State == stateDone {
		return st.State, st.Text, epochOut
	}
	return st.State, st.Error, epochOut
}

// epochStore is a store whose Epoch is a function's.
type epochStore struct {
	*pgstore.Store
	epoch func(context.Context, string) (uint64, error)
}

func (s epochStore) Epoch(ctx context.Context, key string) (uint64, error) { return s.epoch(ctx, key) }

// SetFirstWatchHook makes fn run before the first watch of every etcd
// provider's members, after its read of them.
func SetFirstWatchHook(fn func()) { testHookFirstWatch = fn }

// SetSessionMessageHook makes fn run with the name of every message a
// session actor receives, before the actor handles it: "started",
// "restarting", "stopping", "claimed", "finished", "request" or "other".
// A panic of fn is one of the actor's. nil removes the hook.
func SetSessionMessageHook(fn func(msg string)) {
	if fn == nil {
		testHookSessionMessage = nil
		return
	}
	testHookSessionMessage = func(msg any) {
		name := "other"
		switch msg.(type) {
		case *actor.Started:
			name = "started"
		case *actor.Restarting:
			name = "restarting"
		case *actor.Stopping:
			name = "stopping"
		case claimed:
			name = "claimed"
		case finished:
			name = "finished"
		case *messages.Frame:
			name = "request"
		}
		fn(name)
	}
}

// WatchSessionTimers makes the timers that session actors start from now
// on watched, until t's cleanup, and returns how many of them are
// pending: neither stopped nor fired. Call it before the member starts.
func WatchSessionTimers(t testing.TB) (pending func() int) {
	var mu sync.Mutex
	live := map[*watchedTimer]bool{}
	saved := afterFunc
	t.Cleanup(func() { afterFunc = saved })
	afterFunc = func(d time.Duration, f func()) sessionTimer {
		w := &watchedTimer{}
		mu.Lock()
		live[w] = true
		mu.Unlock()
		w.timer = time.AfterFunc(d, func() {
			mu.Lock()
			delete(live, w)
			mu.Unlock()
			f()
		})
		w.stopped = func() {
			mu.Lock()
			delete(live, w)
			mu.Unlock()
		}
		return w
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(live)
	}
}

// watchedTimer is a session actor's timer that WatchSessionTimers
// watches.
type watchedTimer struct {
	timer   *time.Timer
	stopped func()
}

func (w *watchedTimer) Stop() bool {
	if !w.timer.Stop() {
		return false
	}
	w.stopped()
	return true
}
