package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// TestGivenUpWrite_ReadWaitsForItsTransaction: a write given up by its
// caller's context after it was sent (ErrOutcomeUnknown) while its
// transaction goes on for another write that shares it leaves its actor
// in doubt: a read of the actor does not say "absent" while the
// transaction may still commit, but fails with ErrOutcomeUnknown when its
// own context ends first; a newer write of the actor waits for the old
// transaction, so that the old one cannot overwrite it; once the old
// transaction has ended, a read tells what it did.
func TestGivenUpWrite_ReadWaitsForItsTransaction(t *testing.T) {
	ctx := t.Context()
	s, _ := storeVia(t, &pgstore.Options{Committers: 2})
	for _, n := range []string{"l1", "l2"} {
		if err := s.PersistEvent(ctx, n, 0, []byte("orig")); err != nil {
			t.Fatal(err)
		}
	}
	l1, l2 := lockRows(t, s.Schema(), "events", "l1"), lockRows(t, s.Schema(), "events", "l2")
	// Both committers held on l1's lock.
	h := make(chan error, 2)
	go func() { h <- s.PersistEvent(ctx, "l1", 0, []byte("h1")) }()
	waitLockedN(t, s.Schema(), 1)
	go func() { h <- s.PersistEvent(ctx, "l1", 0, []byte("h2")) }()
	waitLockedN(t, s.Schema(), 2)
	// A and B queue, and will share one transaction.
	actx, cancelA := context.WithCancel(ctx)
	aErr, bErr := make(chan error, 1), make(chan error, 1)
	go func() { aErr <- s.PersistEvent(actx, "x", 0, []byte("old")) }()
	go func() { bErr <- s.PersistEvent(ctx, "l2", 0, []byte("b")) }() // "l2" sorts before "x": the batch waits on l2's lock before it puts x
	pgstore.WaitQueued(s, 2)
	if err := l1.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-h; err != nil {
			t.Fatal(err)
		}
	}
	waitLockedN(t, s.Schema(), 1) // the batch of A and B waits on l2's lock
	cancelA()
	if err := <-aErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("A given up in flight: %v, want ErrOutcomeUnknown", err)
	}
	// A read while A's transaction goes on cannot tell: it waits, and
	// says so when its context ends.
	rctx, cancelRead := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() {
		readErr <- s.GetEvents(rctx, "x", 0, 0, func(uint64, []byte) error { return errors.New("a row seen while A is in doubt") })
	}()
	pgstore.WaitDoubtWaiters(s, 1)
	cancelRead()
	if err := <-readErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Errorf("read of x while A's transaction goes on: %v, want ErrOutcomeUnknown and context.Canceled", err)
	}
	if _, _, err := s.GetSnapshot(rctx, "x"); err == nil {
		t.Error("GetSnapshot of x with a done context while A is in doubt: nil error")
	}
	// A newer write of x waits for A's transaction, which then commits
	// before it.
	newErr := make(chan error, 1)
	go func() { newErr <- s.PersistEvent(ctx, "x", 0, []byte("new")) }()
	pgstore.WaitDoubtWaiters(s, 1)
	if err := l2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bErr; err != nil {
		t.Fatalf("B: %v", err)
	}
	if err := <-newErr; err != nil {
		t.Fatalf("newer write of x: %v", err)
	}
	if got := stored(t, s, "x"); !slices.Equal(got, []string{"0:new"}) {
		t.Errorf("x holds %q, want [0:new]: the newer write was overwritten by the given-up write's transaction", got)
	}
}

// TestGivenUpWrite_CutTransactionSettled: a write whose every caller gave
// up is cancelled and its connection closed, while its transaction waits
// for a lock on the server and may still commit: its actor stays in doubt
// until that transaction has ended, then a read tells what it did.
func TestGivenUpWrite_CutTransactionSettled(t *testing.T) {
	ctx := t.Context()
	s, _, tx := storeWithLockedActor(t)
	giveUpWaitingWrite(t, s)
	rctx, cancelRead := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() { readErr <- s.GetEvents(rctx, "l", 0, 0, func(uint64, []byte) error { return nil }) }()
	pgstore.WaitDoubtWaiters(s, 1)
	cancelRead()
	if err := <-readErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Errorf("read of l while A's transaction waits on the server: %v, want ErrOutcomeUnknown", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The server ran A's transaction to its end (its client gone, it
	// committed or not): the read now tells, and it is whole or absent.
	got := stored(t, s, "l")
	if !slices.Equal(got, []string{"0:a0", "1:a1"}) && !slices.Equal(got, []string{"0:orig"}) {
		t.Errorf("l holds %q, want A's two events or the original one", got)
	}
	if err := s.PersistEvent(ctx, "l", 0, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, "l"); len(got) == 0 || got[0] != "0:new" {
		t.Errorf("l holds %q after a newer write, want 0:new first", got)
	}
}

// waitLockedN returns once n statements on schema's events table wait for
// a lock on the server.
func waitLockedN(t *testing.T, schema string, n int) {
	t.Helper()
	waitLockedOn(t, schema, "events", n)
}

// waitLockedOn returns once n statements on schema's table wait for a
// lock on the server.
func waitLockedOn(t *testing.T, schema, table string, n int) {
	t.Helper()
	watcher, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.WithoutCancel(t.Context()))
	for got := 0; got < n; {
		err := watcher.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%"' || $1 || '".' || $2 || '%'`, schema, table).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
	}
}
