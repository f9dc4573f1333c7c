package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// storeVia opens a store on a fresh schema through a proxy to the test
// server, closed when the test ends.
func storeVia(t *testing.T, o *pgstore.Options) (*pgstore.Store, *proxy) {
	t.Helper()
	p, proxied := startProxy(t, dsn)
	opts := pgstore.Options{Schema: freshSchema()}
	if o != nil {
		opts = *o
		opts.Schema = freshSchema()
	}
	s, err := pgstore.Open(t.Context(), proxied, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The proxy first: Close waits up to CloseTimeout for what is
		// in flight to a silent server.
		p.stop()
		_ = s.Close()
	})
	return s, p
}

// stored returns the events of name, as "index:data" strings.
func stored(t *testing.T, s durability.Store, name string) []string {
	t.Helper()
	var got []string
	err := s.GetEvents(t.Context(), name, 0, 0, func(i uint64, d []byte) error {
		got = append(got, string(rune('0'+i))+":"+string(d))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSilentServer_ContextBoundsWrite: a write whose transaction went to
// a server that then fell silent (a network black hole, a paused server)
// returns when its caller's context is done, not when the network gives
// up, and its error says that its outcome is unknown; a later read tells
// the truth: the write committed when the server got it whole, and is not
// stored when the server never got it.
func TestSilentServer_ContextBoundsWrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault fault
		want  []string
	}{
		{"reply lost", muteReply, []string{"0:x"}},
		{"request lost", dropRequest, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			// One committer, so that the next write needs the one the
			// silent server held.
			s, p := storeVia(t, &pgstore.Options{Committers: 1})
			hit := p.arm(c.fault)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- s.PersistEvent(ctx, "a", 0, []byte("x")) }()
			<-hit // the server holds the transaction's outcome, and says nothing
			cancel()
			err := <-errc
			if !errors.Is(err, pgstore.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
				t.Fatalf("write cut off by its context: %v, want ErrOutcomeUnknown and context.Canceled", err)
			}
			if !strings.Contains(err.Error(), "outcome") {
				t.Errorf("error %q does not say that the outcome is unknown", err)
			}
			if got := stored(t, s, "a"); !slices.Equal(got, c.want) {
				t.Errorf("read after the write: %q, want %q", got, c.want)
			}
			// Its transaction was given up with its caller: the
			// committer is free for the next write.
			if err := s.PersistEvent(t.Context(), "b", 0, []byte("y")); err != nil {
				t.Errorf("next write: %v", err)
			}
		})
	}
}

// TestSilentServer_QueuedWriteWithdrawn: a write that waits in the queue
// behind a transaction held by a silent server, and whose caller's context
// is done, is withdrawn: it fails with the context's error alone (its
// outcome is known: it is not stored) and is never sent.
func TestSilentServer_QueuedWriteWithdrawn(t *testing.T) {
	s, p := storeVia(t, &pgstore.Options{Committers: 1})
	hit := p.arm(muteReply)
	held, release := context.WithCancel(t.Context())
	defer release()
	heldErr := make(chan error, 1)
	go func() { heldErr <- s.PersistEvent(held, "a", 0, []byte("x")) }()
	<-hit // the only committer waits for the silent server
	ctx, cancel := context.WithCancel(t.Context())
	queuedErr := make(chan error, 1)
	go func() { queuedErr <- s.PersistEvent(ctx, "q", 0, []byte("y")) }()
	pgstore.WaitQueued(s, 1)
	cancel()
	if err := <-queuedErr; !errors.Is(err, context.Canceled) || errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("queued write given up: %v, want context.Canceled and a known outcome", err)
	}
	release()
	if err := <-heldErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("write given up in flight: %v, want ErrOutcomeUnknown", err)
	}
	if err := s.PersistEvent(t.Context(), "b", 0, []byte("z")); err != nil { // after the queued write, had it been sent
		t.Fatal(err)
	}
	if got := stored(t, s, "q"); len(got) != 0 {
		t.Errorf("the withdrawn write was stored: %q", got)
	}
}

// TestSilentServer_ClaimOutcomeUnknown: a claim cut off by its context
// once the server had it says that its outcome is unknown; a later read
// of the epoch tells the truth.
func TestSilentServer_ClaimOutcomeUnknown(t *testing.T) {
	s, p := storeVia(t, nil)
	hit := p.arm(muteReply)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, "k")
		errc <- err
	}()
	<-hit
	cancel()
	if err := <-errc; !errors.Is(err, pgstore.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("claim cut off by its context: %v, want ErrOutcomeUnknown and context.Canceled", err)
	}
	if e, err := s.Epoch(t.Context(), "k"); err != nil || e != 1 {
		t.Errorf("Epoch after the claim = %d, %v; want 1 (the server committed it)", e, err)
	}
}

// TestSilentServer_CloseBounded: Close, which takes no context, waits at
// most Options.CloseTimeout for a write in flight to a silent server, then
// gives it up, and returns: it does not wait for pgx's own bound (15
// seconds) on closing the connection to a server that does not even read
// (the bound checked is far from both: Close takes milliseconds). The
// write (whose caller set no bound) fails saying its outcome is unknown.
func TestSilentServer_CloseBounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault fault
	}{{"reply lost", muteReply}, {"request lost", dropRequest}} {
		t.Run(c.name, func(t *testing.T) {
			s, p := storeVia(t, &pgstore.Options{CloseTimeout: 1})
			hit := p.arm(c.fault)
			errc := make(chan error, 1)
			go func() { errc <- s.PersistEvent(context.Background(), "a", 0, []byte("x")) }()
			<-hit
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if d := time.Since(start); d >= 10*time.Second {
				t.Errorf("Close took %v after it gave up a write to a silent server; want it bounded by CloseTimeout, not by the closing of connections", d)
			}
			if err := <-errc; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
				t.Fatalf("write given up by Close: %v, want ErrOutcomeUnknown", err)
			}
		})
	}
}

// TestLostConnection_WriteRetried: a write whose connection is lost in
// flight runs once more on a fresh connection where that is safe: it never
// reached the server, or what it stores is stored already, byte for byte
// (the server committed it and the reply was lost). Where it is not (the
// row holds other bytes, which the first attempt may or may not have
// replaced), it is not run again, never overwriting them, and fails saying
// that its outcome is unknown; a later read tells the truth.
func TestLostConnection_WriteRetried(t *testing.T) {
	ev := func(s ...string) [][]byte {
		var b [][]byte
		for _, x := range s {
			b = append(b, []byte(x))
		}
		return b
	}
	for _, c := range []struct {
		name    string
		fault   fault
		before  [][]byte // events stored first, from 0
		write   func(ctx context.Context, s *pgstore.Store) error
		unknown bool
		want    []string
	}{
		{"new events, request lost", cutRequest, nil,
			func(ctx context.Context, s *pgstore.Store) error { return s.PersistEvents(ctx, "a", 0, ev("x", "y")) },
			false, []string{"0:x", "1:y"}},
		{"new events, reply lost", cutAfterReply, nil,
			func(ctx context.Context, s *pgstore.Store) error { return s.PersistEvents(ctx, "a", 0, ev("x", "y")) },
			false, []string{"0:x", "1:y"}},
		{"overwrite, reply lost", cutAfterReply, ev("old"),
			func(ctx context.Context, s *pgstore.Store) error { return s.PersistEvent(ctx, "a", 0, []byte("new")) },
			false, []string{"0:new"}},
		{"overwrite, request lost", cutRequest, ev("old"),
			func(ctx context.Context, s *pgstore.Store) error { return s.PersistEvent(ctx, "a", 0, []byte("new")) },
			true, []string{"0:old"}},
		{"snapshot, request lost", cutRequest, ev("p", "q", "r"),
			func(ctx context.Context, s *pgstore.Store) error { return s.PersistSnapshot(ctx, "a", 2, []byte("s")) },
			false, []string{"2:r"}},
		{"delete, reply lost", cutAfterReply, ev("p", "q", "r"),
			func(ctx context.Context, s *pgstore.Store) error { return s.DeleteEvents(ctx, "a", 1) },
			false, []string{"2:r"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			s, p := storeVia(t, nil)
			if len(c.before) > 0 {
				if err := s.PersistEvents(ctx, "a", 0, c.before); err != nil {
					t.Fatal(err)
				}
			}
			hit := p.arm(c.fault)
			err := c.write(ctx, s)
			select {
			case <-hit:
			default:
				t.Fatal("the write's transaction did not go through the armed connection")
			}
			switch {
			case c.unknown && (!errors.Is(err, pgstore.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "outcome")):
				t.Errorf("write on a lost connection, not safe to run again: %v, want an error saying the outcome is unknown (ErrOutcomeUnknown)", err)
			case !c.unknown && err != nil:
				t.Errorf("write on a lost connection, safe to run again: %v, want it run again and nil", err)
			}
			if got := stored(t, s, "a"); !slices.Equal(got, c.want) {
				t.Errorf("read after the write: %q, want %q", got, c.want)
			}
		})
	}
}

// TestLostConnection_FencedRerun: a write through a claim whose
// connection is lost after it was sent runs again with its fence check;
// when a newer claim was taken meanwhile, it fails as fenced, and saying
// that its outcome is unknown (the first run may have committed before
// the newer claim).
func TestLostConnection_FencedRerun(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, nil)
	old, err := s.Claim(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	hit := p.arm(cutRequest)
	err = old.PersistEvent(ctx, "a", 0, []byte("x"))
	<-hit
	if !errors.Is(err, pgstore.ErrFenced) || !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("fenced write run again: %v, want ErrFenced and ErrOutcomeUnknown", err)
	}
	if got := stored(t, s, "a"); len(got) != 0 {
		t.Errorf("a fenced write was stored: %q", got)
	}
}

// TestLostConnection_BatchRerunPartly: writes that share a transaction
// whose connection was lost are judged one by one when it runs again: the
// one whose row holds other bytes fails saying its outcome is unknown,
// and the others commit without it.
func TestLostConnection_BatchRerunPartly(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, &pgstore.Options{Committers: 1})
	if err := s.PersistEvent(ctx, "a", 0, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// Hold the only committer, so that the next two writes queue and
	// share its next transaction.
	release, heldErr := holdCommitter(ctx, s, p)
	defer release()
	overwrite, fresh := make(chan error, 1), make(chan error, 1)
	go func() { overwrite <- s.PersistEvent(ctx, "a", 0, []byte("new")) }()
	go func() { fresh <- s.PersistEvents(ctx, "b", 0, [][]byte{[]byte("x"), []byte("y")}) }()
	pgstore.WaitQueued(s, 2)
	cut := p.arm(cutRequest)
	release()
	<-heldErr
	if err := <-overwrite; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("overwrite on a lost connection: %v, want ErrOutcomeUnknown", err)
	}
	if err := <-fresh; err != nil {
		t.Errorf("new events on a lost connection: %v, want them run again and nil", err)
	}
	<-cut
	if got := stored(t, s, "a"); !slices.Equal(got, []string{"0:old"}) {
		t.Errorf("a holds %q, want [0:old]", got)
	}
	if got := stored(t, s, "b"); !slices.Equal(got, []string{"0:x", "1:y"}) {
		t.Errorf("b holds %q, want [0:x 1:y]", got)
	}
}

// TestSilentServer_QueuedWriteAtCloseNotSent: a write still queued when
// Close gives up on a silent server is never sent, so it fails with a
// known outcome (not stored), not ErrOutcomeUnknown, while the write in
// flight does.
func TestSilentServer_QueuedWriteAtCloseNotSent(t *testing.T) {
	s, p := storeVia(t, &pgstore.Options{Committers: 1, CloseTimeout: 1})
	hit := p.arm(muteReply)
	heldErr := make(chan error, 1)
	go func() { heldErr <- s.PersistEvent(context.Background(), "a", 0, []byte("x")) }()
	<-hit // the only committer waits for the silent server
	queuedErr := make(chan error, 1)
	go func() { queuedErr <- s.PersistEvent(context.Background(), "q", 0, []byte("y")) }()
	pgstore.WaitQueued(s, 1)
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-heldErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("write in flight given up by Close: %v, want ErrOutcomeUnknown", err)
	}
	err := <-queuedErr
	if err == nil {
		t.Fatal("queued write after Close gave up: nil error, want a failure")
	}
	if errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("queued write never sent (Close gave up before a committer took it): %v; want a known outcome (not stored), not ErrOutcomeUnknown", err)
	}
}

// TestClaim_NotSentIsKnown: a Claim whose context is done before anything
// was sent fails with the context's error, not ErrOutcomeUnknown, and the
// epoch stays as it was.
func TestClaim_NotSentIsKnown(t *testing.T) {
	s, _ := storeVia(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Claim(ctx, "k")
	if err == nil {
		t.Fatal("Claim with a done context: nil error")
	}
	if errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("Claim with a context done before anything was sent: %v; want the context's error with a known outcome, not ErrOutcomeUnknown", err)
	}
	if e, err := s.Epoch(t.Context(), "k"); err != nil || e != 0 {
		t.Errorf("Epoch = %d, %v; want 0 (nothing was sent)", e, err)
	}
}

// TestLostConnection_RerunFencedWriteAlone: when a batch's connection is
// lost after it was sent and the fence check of its run again refuses one
// write (its claim superseded), that write alone fails with ErrFenced;
// the other writes of the batch run again alone and commit, and are never
// told that they are fenced.
func TestLostConnection_RerunFencedWriteAlone(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, &pgstore.Options{Committers: 1})
	old, err := s.Claim(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "k"); err != nil { // supersedes old
		t.Fatal(err)
	}
	// Hold the only committer, so that the next two writes share its
	// next transaction.
	release, heldErr := holdCommitter(ctx, s, p)
	defer release()
	fencedErr, otherErr := make(chan error, 1), make(chan error, 1)
	go func() { fencedErr <- old.PersistEvent(ctx, "a", 0, []byte("x")) }()
	go func() { otherErr <- s.PersistEvents(ctx, "b", 0, [][]byte{[]byte("y")}) }()
	pgstore.WaitQueued(s, 2)
	cut := p.arm(cutRequest)
	release()
	<-heldErr
	if err := <-fencedErr; !errors.Is(err, pgstore.ErrFenced) {
		t.Errorf("superseded claim's write: %v, want ErrFenced", err)
	}
	err = <-otherErr
	<-cut
	if errors.Is(err, pgstore.ErrFenced) {
		t.Errorf("unfenced write sharing the batch: %v; it is told ErrFenced, though no claim of its own was superseded", err)
	}
	if err != nil {
		t.Errorf("unfenced write sharing the batch: %v, want nil (run again without the fenced write, as the first run's per-write retry does)", err)
	}
	if got := stored(t, s, "b"); len(got) != 1 {
		t.Errorf("b holds %q, want [0:y]", got)
	}
}

// holdCommitter holds a write to actor "h" in the committer's
// transaction, its reply muted by p, until release: with one committer,
// the writes sent meanwhile queue and share its next transaction.
// heldErr gets the held write's outcome.
func holdCommitter(ctx context.Context, s *pgstore.Store, p *proxy) (release context.CancelFunc, heldErr chan error) {
	hit := p.arm(muteReply)
	held, release := context.WithCancel(ctx)
	heldErr = make(chan error, 1)
	go func() { heldErr <- s.PersistEvent(held, "h", 0, []byte("h")) }()
	<-hit
	return release, heldErr
}
