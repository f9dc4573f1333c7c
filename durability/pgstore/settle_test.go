package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// guard bounds a wait that must end, so that a test that fails reports
// rather than hangs; it is far above what the wait takes (milliseconds).
const guard = 30 * time.Second

// lockRows locks the rows of schema's table (events, or fences) whose
// name (or key) is key, in a transaction of its own, returned.
func lockRows(t *testing.T, schema, table, key string) pgx.Tx {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	col := "name"
	if table == "fences" {
		col = "key"
	}
	if _, err := tx.Exec(t.Context(), fmt.Sprintf("SELECT 1 FROM %s WHERE %s = $1 FOR UPDATE", pgx.Identifier{schema, table}.Sanitize(), col), []byte(key)); err != nil {
		t.Fatal(err)
	}
	return tx
}

// storeWithLockedActor opens a store through a proxy, with one
// committer, stores event 0 of actor "l" ("orig") and locks its row in a
// transaction of the test's, returned: a write of l waits on the server
// until that transaction ends.
func storeWithLockedActor(t *testing.T) (*pgstore.Store, *proxy, pgx.Tx) {
	t.Helper()
	s, p := storeVia(t, &pgstore.Options{Committers: 1})
	if err := s.PersistEvent(t.Context(), "l", 0, []byte("orig")); err != nil {
		t.Fatal(err)
	}
	return s, p, lockRows(t, s.Schema(), "events", "l")
}

// giveUpWaitingWrite writes events a0 and a1 of actor "l" (see
// storeWithLockedActor) and gives the write up once it waits for the lock
// on the server: it fails with ErrOutcomeUnknown, and may still commit.
func giveUpWaitingWrite(t *testing.T, s *pgstore.Store) {
	t.Helper()
	actx, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	aErr := make(chan error, 1)
	go func() { aErr <- s.PersistEvents(actx, "l", 0, [][]byte{[]byte("a0"), []byte("a1")}) }()
	waitLockedN(t, s.Schema(), 1)
	cancelA()
	if err := <-aErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("A given up in flight: %v, want ErrOutcomeUnknown", err)
	}
}

// lockedBackend returns the pid of the server backend whose statement on
// schema's events table waits for a lock.
func lockedBackend(t *testing.T, schema string) int32 {
	t.Helper()
	var pid int32
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.WithoutCancel(t.Context()))
	if err := c.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE '%"' || $1 || '".events%' LIMIT 1`, schema).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitIdle returns once the server backend pid runs no transaction.
func waitIdle(t *testing.T, pid int32) {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.WithoutCancel(t.Context()))
	for busy := true; busy; {
		err := c.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle')`, pid).Scan(&busy)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestGivenUpWrite_SettledThoughBackendLivesOn: a write given up after it
// was sent leaves its actor in doubt until its transaction has ended on
// the server, and no longer: not until the server backend that ran it has
// exited. Here that backend lives on after the transaction (the network
// lost the client, and the server's end of the connection stays open),
// as one whose pid a new backend took would seem to; the read of the
// actor does not wait for it.
func TestGivenUpWrite_SettledThoughBackendLivesOn(t *testing.T) {
	ctx := t.Context()
	s, p, lock := storeWithLockedActor(t)
	p.arm(holdAfterFirst)
	giveUpWaitingWrite(t, s)
	if err := lock.Rollback(ctx); err != nil { // A's transaction runs to its end
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	var got []string
	err := s.GetEvents(rctx, "l", 0, 0, func(i uint64, d []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", i, d))
		return nil
	})
	if err != nil {
		t.Fatalf("read of l once A's transaction has ended, its backend alive: %v; want the doubt ended with the transaction", err)
	}
	if !slices.Equal(got, []string{"0:a0", "1:a1"}) && !slices.Equal(got, []string{"0:orig"}) {
		t.Errorf("l holds %q, want A's two events or the original one", got)
	}
}

// TestDoubt_UnreachableServer: while the server cannot be reached, a read
// or write of an actor in doubt fails, saying that a write of the actor is
// in doubt (ErrOutcomeUnknown) and that the server cannot be reached,
// instead of waiting for ever (its caller set no bound); once the server
// can be reached again, the doubt is settled and a read tells.
func TestDoubt_UnreachableServer(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, &pgstore.Options{Committers: 1})
	if err := s.PersistEvent(ctx, "a", 0, []byte("old")); err != nil { // the pool keeps its connection
		t.Fatal(err)
	}
	hit := p.arm(cutRequest)
	p.refuse(true)
	err := s.PersistEvent(ctx, "a", 0, []byte("new")) // lost, and the store cannot connect again
	<-hit
	if !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("write lost with the server unreachable: %v, want ErrOutcomeUnknown", err)
	}
	gctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	for _, c := range []struct {
		name string
		call func(context.Context) error
	}{
		{"GetEvents", func(ctx context.Context) error {
			return s.GetEvents(ctx, "a", 0, 0, func(uint64, []byte) error { return nil })
		}},
		{"GetSnapshot", func(ctx context.Context) error { _, _, err := s.GetSnapshot(ctx, "a"); return err }},
		{"PersistEvent", func(ctx context.Context) error { return s.PersistEvent(ctx, "a", 1, []byte("next")) }},
	} {
		err := c.call(gctx)
		if !errors.Is(err, pgstore.ErrOutcomeUnknown) || gctx.Err() != nil || !strings.Contains(err.Error(), "reach") {
			t.Errorf("%s of an actor in doubt, the server unreachable: %v; want an error wrapping ErrOutcomeUnknown saying the server cannot be reached, before its context ends", c.name, err)
		}
	}
	p.refuse(false)
	if got := stored(t, s, "a"); !slices.Equal(got, []string{"0:old"}) {
		t.Errorf("a holds %q once the server is back, want [0:old] (the lost write never reached it)", got)
	}
}

// TestLostConnection_RerunWaitsForFirstRun: a write whose connection was
// lost after its transaction was sent, while the server backend goes on
// with it, is not run again (nor reported) before that transaction has
// ended: run again at once, it would commit and be reported, and the
// first run, still going, could then overwrite a later write of the
// actor. Here the first run waits on a lock when its connection is lost;
// once it commits, the write is reported stored, and a later write of
// the actor stays.
func TestLostConnection_RerunWaitsForFirstRun(t *testing.T) {
	ctx := t.Context()
	s, p, lock := storeWithLockedActor(t)
	// A and B share a transaction, which waits on l's lock before it
	// puts x ("l" sorts first); A's caller then gives up, so that B runs
	// again alone, touching no locked row.
	release, heldErr := holdCommitter(ctx, s, p)
	defer release()
	actx, cancelA := context.WithCancel(ctx)
	aErr, bErr := make(chan error, 1), make(chan error, 1)
	go func() { aErr <- s.PersistEvent(actx, "l", 0, []byte("a")) }()
	go func() { bErr <- s.PersistEvent(ctx, "x", 0, []byte("b1")) }()
	pgstore.WaitQueued(s, 2)
	p.arm(holdAfterFirst)
	release()
	<-heldErr
	waitLockedN(t, s.Schema(), 1)
	first := lockedBackend(t, s.Schema())
	cancelA()
	if err := <-aErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("A given up in flight: %v, want ErrOutcomeUnknown", err)
	}
	p.cut() // B's connection is lost; the first run goes on
	for pgstore.RerunWaiters(s) == 0 {
		select {
		case err := <-bErr:
			t.Fatalf("B reported (%v) while the first run of its transaction still waits on the server, and may overwrite a later write", err)
		default:
			runtime.Gosched()
		}
	}
	if err := lock.Rollback(ctx); err != nil { // the first run goes on, and commits
		t.Fatal(err)
	}
	if err := <-bErr; err != nil {
		t.Fatalf("B, whose first run committed: %v, want nil", err)
	}
	if err := s.PersistEvent(ctx, "x", 0, []byte("b2")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, first)
	if got := stored(t, s, "x"); !slices.Equal(got, []string{"0:b2"}) {
		t.Errorf("x holds %q, want [0:b2]: the later write was overwritten", got)
	}
}

// TestSilentServer_ClaimInDoubt: a claim whose caller gave up while its
// transaction waits on the server (ErrOutcomeUnknown) leaves its key in
// doubt: Epoch waits until that transaction has ended, instead of
// reporting the older epoch of a claim that then commits.
func TestSilentServer_ClaimInDoubt(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, nil)
	if _, err := s.Claim(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	lock := lockRows(t, s.Schema(), "fences", "k")
	p.arm(holdAfterFirst)
	p.dropCancels() // the server is not asked to cancel the claim: it goes on
	cctx, cancel := context.WithCancel(ctx)
	claimErr := make(chan error, 1)
	go func() {
		_, err := s.Claim(cctx, "k")
		claimErr <- err
	}()
	waitLockedOn(t, s.Schema(), "fences", 1)
	cancel()
	if err := <-claimErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("claim given up while it waits on the server: %v, want ErrOutcomeUnknown", err)
	}
	type result struct {
		epoch uint64
		err   error
	}
	epoch := make(chan result, 1)
	go func() {
		e, err := s.Epoch(ctx, "k")
		epoch <- result{e, err}
	}()
	for pgstore.DoubtWaiters(s) == 0 {
		select {
		case r := <-epoch:
			t.Fatalf("Epoch returned %d, %v while the claim in doubt may still commit", r.epoch, r.err)
		default:
			runtime.Gosched()
		}
	}
	if err := lock.Rollback(ctx); err != nil { // the claim goes on, and commits
		t.Fatal(err)
	}
	if r := <-epoch; r.err != nil || r.epoch != 2 {
		t.Errorf("Epoch once the claim in doubt committed = %d, %v; want 2", r.epoch, r.err)
	}
}

// TestSalvage_OutcomeUnknownLeavesActorInDoubt: a Salvage whose commit was
// sent and whose answer did not come (its caller gave up) fails with
// ErrOutcomeUnknown and leaves its actor in doubt: a read of the actor
// waits until the Salvage's transaction has ended, and then tells what it
// did, rather than reading the rows it may be about to drop.
func TestSalvage_OutcomeUnknownLeavesActorInDoubt(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, nil)
	for i := range uint64(3) {
		if err := s.PersistEvent(ctx, "a", i, fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sql(t, fmt.Sprintf("UPDATE %s.events SET data = 'damaged' WHERE name = $1 AND idx = $2", s.Schema()), []byte("a"), biased(1))
	hit := p.arm(holdCommit) // the commit is held on its way to the server
	sctx, cancel := context.WithCancel(ctx)
	salvageErr := make(chan error, 1)
	go func() {
		_, err := s.Salvage(sctx, "a")
		salvageErr <- err
	}()
	<-hit
	cancel()
	if err := <-salvageErr; !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("Salvage given up after its commit was sent: %v, want ErrOutcomeUnknown", err)
	}
	read := make(chan error, 1)
	var got []string
	go func() {
		var err error
		got, err = events(t, s, "a", 0)
		read <- err
	}()
	for pgstore.DoubtWaiters(s) == 0 {
		select {
		case err := <-read:
			t.Fatalf("read of the actor returned (%q, %v) while its Salvage may still commit", got, err)
		default:
			runtime.Gosched()
		}
	}
	p.release() // the commit reaches the server
	if err := <-read; err != nil || !slices.Equal(got, []string{"0:event 0"}) {
		t.Errorf("read once the Salvage committed: %q, %v; want [0:event 0]", got, err)
	}
}

// TestClaim_WaitsForClaimInDoubt: a Claim of a key whose earlier claim
// through the store is in doubt (given up, its transaction not yet run
// by the server) waits until that transaction has ended: taken at once,
// it would be superseded when the earlier one commits after it, and its
// holder fenced by a claim nobody holds.
func TestClaim_WaitsForClaimInDoubt(t *testing.T) {
	ctx := t.Context()
	s, p := storeVia(t, nil)
	if _, err := s.Claim(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	hit := p.arm(holdRequest)
	p.dropCancels() // the server is not asked to cancel the claim: it runs it later
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		<-hit
		cancel()
	}()
	if _, err := s.Claim(cctx, "k"); !errors.Is(err, pgstore.ErrOutcomeUnknown) {
		t.Fatalf("claim given up once sent: %v, want ErrOutcomeUnknown", err)
	}
	type result struct {
		c   *pgstore.Claim
		err error
	}
	second := make(chan result, 1)
	go func() {
		c, err := s.Claim(ctx, "k")
		second <- result{c, err}
	}()
	var r result
	done := false
	for !done && pgstore.DoubtWaiters(s) == 0 {
		select {
		case r = <-second:
			done = true
		default:
			runtime.Gosched()
		}
	}
	p.release() // the server gets the earlier claim: it commits
	if !done {
		r = <-second
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if e, err := s.Epoch(ctx, "k"); err != nil || e != 3 {
		t.Fatalf("Epoch after both claims = %d, %v; want 3", e, err)
	}
	if err := r.c.PersistEvent(ctx, "a", 0, []byte("x")); err != nil {
		t.Errorf("write through the claim taken last: %v, want nil: the earlier claim, in doubt when it was taken, superseded it", err)
	}
}
