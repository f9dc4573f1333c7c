package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/actors"
	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

func newRuntime(t *testing.T) *actors.Runtime {
	t.Helper()
	rt, err := actors.NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return rt
}

// TestSession_StaleIncarnationIsFenced runs one session in two
// incarnations at once, as two members would after the first was cut off:
// the first is inside a tool call when the second claims the session and
// resumes it (the call is answered as interrupted, not run again) to the
// end. When the first's call then returns, the store refuses its write of
// the result (ErrFenced): the stale incarnation ends without writing
// anything or running another call, and the session's record is the
// second's.
func TestSession_StaleIncarnationIsFenced(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fn, release, first := stalledIncarnation(ctx, t, store, side, "s")

	state, text, epoch := cluster.RunIncarnation(ctx, newRuntime(t), store, fn, "s", firstRequest("s")...)
	if state != "done" || text != "All done." || epoch != 2 {
		t.Fatalf("second incarnation: %s %q epoch %d, want done \"All done.\" epoch 2", state, text, epoch)
	}
	release()
	o := <-first
	if o.state != "moved" || o.epoch != 1 || !strings.Contains(o.text, pgstore.ErrFenced.Error()) {
		t.Fatalf("first incarnation: %+v, want moved at epoch 1 with %q", o, pgstore.ErrFenced)
	}
	t.Logf("stale incarnation: %s", o.text)
	// c1 ran once (in the first incarnation, which the second answered
	// as interrupted), c2 once (in the second).
	if got := side.runs(t); len(got) != 2 || got["s c1"] != 1 || got["s c2"] != 1 {
		t.Errorf("side effects %v, want s c1 and s c2 once each", got)
	}
	if e, err := store.Epoch(ctx, "s"); err != nil || e != 2 {
		t.Errorf("epoch %d, %v; want 2", e, err)
	}
}

// TestSession_EpochCheckIsBounded: when a session's loop fails, its
// incarnation reads the session's epoch to tell a fenced incarnation from
// a failed session. A store that does not answer that read does not keep
// the incarnation (nor a member's Close, which waits for it) for ever: the
// read gives up after the request timeout, and the incarnation ends as
// "retry" (whether it was fenced is unknown).
func TestSession_EpochCheckIsBounded(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	// One tool call, and no answer after it: the loop fails once the
	// call has run (the script is exhausted).
	s := script(1)
	s.Turns = s.Turns[:1]
	model, err := scripted.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	fn := func(id string) (actors.Spec, *tools.LoopOptions, error) {
		return model.Spec("model"), &tools.LoopOptions{
			RouterOptions: tools.RouterOptions{Name: "session", Tools: []*tools.Tool{side.appendTool(id, hooks{})}},
			MaxIterations: 2,
		}, nil
	}
	unblock := make(chan struct{})
	defer close(unblock)
	silent := func(ctx context.Context, _ string) (uint64, error) {
		select { // a store that does not answer
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-unblock:
			return 0, errors.New("the test ended")
		}
	}
	type outcome struct{ state, text string }
	done := make(chan outcome, 1)
	go func() {
		state, text, _ := cluster.RunIncarnationEpoch(context.Background(), newRuntime(t), store, silent, 100*time.Millisecond, fn, "s", firstRequest("s")...)
		done <- outcome{state, text}
	}()
	select {
	case o := <-done:
		if o.state != "retry" || !strings.Contains(o.text, "epoch could not be read") {
			t.Errorf("incarnation: %s %q, want retry: its epoch could not be read", o.state, o.text)
		}
	case <-time.After(30 * time.Second): // a bound on a hang, not a speed check
		t.Fatal("the incarnation still waits for its epoch 30 s after its loop failed")
	}
}

// TestMember_RunsSessions runs sessions on a one-member cluster (the
// automanaged provider): each completes on its first activation, each
// call runs once, and asking again for a finished session gives its
// stored answer without running anything.
func TestMember_RunsSessions(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: sessionFunc(t, 3, side, nil),
		Hold:    200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const n = 5
	var wg sync.WaitGroup
	results := make([]*cluster.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", i)
			results[i], errs[i] = m.Run(ctx, id, firstRequest(id)...)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("session s%d: %v", i, errs[i])
		}
		if r := results[i]; r.Text != "All done." || r.Epoch != 1 || r.Member != m.Address() {
			t.Errorf("session s%d: %+v, want \"All done.\" at epoch 1 on %s", i, r, m.Address())
		}
	}
	want := map[string]int{}
	for i := range n {
		for c := 1; c <= 3; c++ {
			want[fmt.Sprintf("s%d c%d", i, c)] = 1
		}
	}
	got := side.runs(t)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("side effects %v, want %v", got, want)
	}

	again, err := m.Run(ctx, "s0", firstRequest("s0")...)
	if err != nil || again.Text != "All done." || again.Requests != 1 {
		t.Errorf("asking a finished session again: %+v, %v", again, err)
	}
	if got := side.runs(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("asking again ran calls: %v", got)
	}
}

// TestMember_EndedSessionStopsAndAnswersFromStore: a session that has
// ended does not stay active (Linger negative: it stops once it has
// answered); asking for it again activates it anew, which answers from
// the store without running a call or asking the model.
func TestMember_EndedSessionStopsAndAnswersFromStore(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: sessionFunc(t, 2, side, nil),
		Hold:    200 * time.Millisecond,
		Linger:  -1,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil || first.Text != "All done." {
		t.Fatalf("first run: %+v, %v", first, err)
	}
	again, err := m.Run(ctx, "s", firstRequest("s")...)
	if err != nil || again.Text != "All done." || again.Epoch <= first.Epoch {
		t.Fatalf("run again: %+v, %v; want the answer from a new activation (epoch above %d)", again, err, first.Epoch)
	}
	if got := side.runs(t); len(got) != 2 || got["s c1"] != 1 || got["s c2"] != 1 {
		t.Errorf("side effects %v, want s c1 and s c2 once each", got)
	}
}

// TestMember_RunReturnsWhenCancelled: Run gives up as soon as its ctx
// ends, also while the session holds its request (Hold and
// RequestTimeout are long here), and leaves nothing waiting. The session
// is not disturbed: it goes on, and a later Run gets its answer from the
// same incarnation.
func TestMember_RunReturnsWhenCancelled(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	m := startLoneMember(t, &cluster.Options{
		Store: store,
		Session: sessionFunc(t, 1, side, func(string) hooks {
			return hooks{before: func(ctx context.Context, _ string) {
				once.Do(func() { close(started) })
				select {
				case <-release:
				case <-ctx.Done():
				}
			}}
		}),
		Hold:           10 * time.Minute,
		RequestTimeout: 10 * time.Minute,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(ctx, "s", firstRequest("s")...)
		done <- err
	}()
	select {
	case <-started: // the session holds the request: its call is running
	case err := <-done:
		t.Fatalf("Run ended before the session's call ran: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after its ctx was cancelled: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a bound on a hang, not a speed check
		t.Fatal("Run still waiting a minute after its ctx was cancelled")
	}

	close(release)
	again, cancelAgain := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAgain()
	res, err := m.Run(again, "s", firstRequest("s")...)
	if err != nil || res.Text != "All done." || res.Epoch != 1 {
		t.Fatalf("Run again: %+v, %v; want \"All done.\" from the first incarnation", res, err)
	}
	if got := side.runs(t); len(got) != 1 || got["s c1"] != 1 {
		t.Errorf("side effects %v, want s c1 once", got)
	}
}

// TestMember_RunEndsWhenMemberCloses: a Run in progress (its ctx has no
// deadline, its session's call runs until cancelled) returns as soon as
// its member closes, with an error wrapping ErrClosed, rather than asking
// the stopped system again for ever; a Run after Close returns it at once.
func TestMember_RunEndsWhenMemberCloses(t *testing.T) {
	leakCheck(t)
	store := openStore(t, freshSchema())
	side := newSideFile(t)
	started := make(chan struct{})
	var once sync.Once
	m, err := cluster.Start(&cluster.Options{
		Provider: loneProvider(t),
		Store:    store,
		Session: sessionFunc(t, 1, side, func(string) hooks {
			return hooks{before: func(ctx context.Context, _ string) {
				once.Do(func() { close(started) })
				<-ctx.Done()
			}}
		}),
		Hold: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(context.Background(), "s", firstRequest("s")...)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("Run ended before the session's call ran: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, cluster.ErrClosed) {
			t.Errorf("Run when its member closed: %v, want ErrClosed", err)
		}
	case <-time.After(20 * time.Second): // a bound on a hang, not a speed check
		t.Fatal("Run still running 20 s after its member closed")
	}
	if _, err := m.Run(context.Background(), "s", firstRequest("s")...); !errors.Is(err, cluster.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
}

// TestMember_StoreFailureIsNotASessionFailure: a session that cannot be
// claimed because its store fails (here its fences table is missing for a
// while) has not failed: its incarnation stops without keeping an answer,
// Run asks again, and once the store works the session runs to its end.
func TestMember_StoreFailureIsNotASessionFailure(t *testing.T) {
	leakCheck(t)
	b := newBreakableStore(t)
	store, side, ctx, rename := b.store, b.side, b.ctx, b.rename
	claimFailed := make(chan struct{})
	m := startLoneMember(t, &cluster.Options{
		Store:   store,
		Session: sessionFunc(t, 1, side, nil),
		Hold:    200 * time.Millisecond,
		Logger:  slog.New(&onWarn{session: "s", warned: claimFailed}),
	})
	rename(t, "fences", "fences_away")
	done := runAllDone(ctx, m, "s")
	select {
	case <-claimFailed:
	case err := <-done:
		t.Fatalf("Run ended while the session could not be claimed: %v", err)
	}
	rename(t, "fences_away", "fences")
	if err := <-done; err != nil {
		t.Fatalf("Run, once the store works again: %v; want the session's answer", err)
	}
	if got := side.runs(t); len(got) != 1 || got["s c1"] != 1 {
		t.Errorf("side effects %v, want s c1 once", got)
	}
}

// onWarn is a slog handler that closes warned at the first warning about
// session.
type onWarn struct {
	session string
	warned  chan struct{}
	once    sync.Once
}

func (h *onWarn) Enabled(context.Context, slog.Level) bool { return true }

func (h *onWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "session" && a.Value.String() == h.session {
			h.once.Do(func() { close(h.warned) })
			return false
		}
		return true
	})
	return nil
}

func (h *onWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onWarn) WithGroup(string) slog.Handler      { return h }

// TestStart_AddressInUse: Start on an address another listener holds
// (as a member and as a client) fails with an error that names the
// address and says it is in use, and leaves nothing running.
func TestStart_AddressInUse(t *testing.T) {
	store := openStore(t, freshSchema())
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, client := range []bool{false, true} {
		t.Run(fmt.Sprintf("client=%v", client), func(t *testing.T) {
			leakCheck(t)
			m, err := cluster.Start(&cluster.Options{
				Address:  addr,
				Provider: loneProvider(t),
				Store:    store, Client: client,
				Session: sessionFunc(t, 1, newSideFile(t), nil),
			})
			if err == nil {
				m.Close(context.Background())
				t.Fatalf("Start on %s, which another listener holds, succeeded", addr)
			}
			if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "address already in use") {
				t.Fatalf("Start on a taken address: %v; want an error naming %s and saying it is in use", err, addr)
			}
			t.Log(err)
		})
	}
}

// TestStart_HealthPortInUse: an automanaged member whose health-check
// port another listener holds fails Start with an error that names the
// address, and leaves nothing running.
func TestStart_HealthPortInUse(t *testing.T) {
	leakCheck(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	port := taken.Addr().(*net.TCPAddr).Port
	m, err := cluster.Start(&cluster.Options{
		Provider: cluster.Automanaged(port, []string{addr}, 100*time.Millisecond),
		Store:    openStore(t, freshSchema()), Session: sessionFunc(t, 1, newSideFile(t), nil),
	})
	if err == nil {
		m.Close(context.Background())
		t.Fatalf("Start with its health port %s held by another listener succeeded", addr)
	}
	if !strings.Contains(err.Error(), "health checks on "+addr) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start: %v; want an error naming the health checks' address %s, in use", err, addr)
	}
}

// TestStart_RefusesAddressBeyondLoopback: a member (or client) has no
// authentication, so Start refuses an address beyond loopback (every
// interface, another IP) with remote.ErrNotLoopback unless
// Options.AllowRemote, and leaves nothing running; with AllowRemote it
// listens there.
func TestStart_RefusesAddressBeyondLoopback(t *testing.T) {
	store := openStore(t, freshSchema())
	start := func(t *testing.T, addr string, client, allow bool) (*cluster.Member, error) {
		return cluster.Start(&cluster.Options{
			Address: addr, AllowRemote: allow,
			Provider: loneProvider(t),
			Store:    store, Client: client,
			Session: sessionFunc(t, 1, newSideFile(t), nil),
		})
	}
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		for _, client := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/client=%v", addr, client), func(t *testing.T) {
				leakCheck(t)
				m, err := start(t, addr, client, false)
				if err == nil {
					m.Close(context.Background())
					t.Fatalf("Start on %s without AllowRemote succeeded", addr)
				}
				if !errors.Is(err, remote.ErrNotLoopback) || !strings.Contains(err.Error(), "AllowRemote") {
					t.Fatalf("Start on %s: %v; want remote.ErrNotLoopback naming AllowRemote", addr, err)
				}
			})
		}
	}
	t.Run("allowed", func(t *testing.T) {
		leakCheck(t)
		m, err := start(t, "0.0.0.0:0", false, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
