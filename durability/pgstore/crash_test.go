package pgstore_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
)

// TestCrashedServer_ReusedIDNotTakenForCommit: a server that crashes
// forgets the transaction ids it assigned that nothing durable names, and
// assigns them again after its recovery. A write whose connection the
// crash took, with its transaction's id reported and nothing of it
// written, must not be taken for committed because another transaction,
// given the same id after the crash, committed: it is stored (run again)
// or fails, and never reports success while absent.
func TestCrashedServer_ReusedIDNotTakenForCommit(t *testing.T) {
	t.Setenv(pgtest.EnvDSN, "") // a server of its own: the test crashes it
	// Nothing durable names the ids after the write's: no autovacuum,
	// whose transactions would take them, and no WAL for standbys, whose
	// snapshots of the running transactions (every 15 seconds) would.
	srv, err := pgtest.Start(&pgtest.Options{Settings: map[string]string{
		"autovacuum": "off", "wal_level": "minimal", "max_wal_senders": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	// Rarely, the server does not assign the id again (something took it
	// before the crash): the write then shows nothing, and runs again.
	for try := 1; !crashedWrite(t, srv.DSN); try++ {
		if try == 5 {
			t.Fatal("in 5 tries, the server never assigned the write's id again after its crash: the test shows nothing")
		}
	}
}

// crashedWrite runs one write of TestCrashedServer_ReusedIDNotTakenForCommit
// against the server of dsn, and reports whether the server assigned its
// id again after the crash (else the write shows nothing).
func crashedWrite(t *testing.T, dsn string) bool {
	ctx := t.Context()
	p, proxied := startProxy(t, dsn)
	s, err := pgstore.Open(ctx, proxied, &pgstore.Options{Schema: freshSchema(), Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.stop()
		_ = s.Close()
	}()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(context.WithoutCancel(ctx)) }()
	if _, err := c.Exec(ctx, "CHECKPOINT"); err != nil { // none comes between the write and the crash
		t.Fatal(err)
	}

	hit := p.arm(holdAfterFlush)
	wErr := make(chan error, 1)
	go func() { wErr <- s.PersistEvent(ctx, "a", 0, []byte("x")) }()
	<-hit
	// The write's backend, once its transaction has its id.
	var pid int32
	var xid int64
	for pid == 0 {
		err := c.QueryRow(ctx, `SELECT pid, backend_xid::text::bigint FROM pg_catalog.pg_stat_activity
			WHERE backend_xid IS NOT NULL AND pid <> pg_catalog.pg_backend_pid()`).Scan(&pid, &xid)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
	}
	p.stall(true) // the store reaches the server again only once the id is reused
	// A backend killed: the server crashes (ending this session too, its
	// error is that), and recovers.
	_, _ = c.Exec(ctx, fmt.Sprintf("COPY (SELECT 1) TO PROGRAM 'kill -KILL %d'", pid))
	for c.Ping(ctx) == nil { // until the server has noticed, and ends this session
	}
	c.Close(ctx)
	for {
		if c, err = pgx.Connect(ctx, dsn); err == nil {
			if err = c.Ping(ctx); err == nil {
				break
			}
			c.Close(ctx)
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(10 * time.Millisecond): // the server recovers
		}
	}
	reused, first := false, int64(0)
	for id := int64(0); id < xid; {
		if err := c.QueryRow(ctx, "SELECT pg_catalog.txid_current()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		first = cmp.Or(first, id)
		reused = reused || id == xid
	}
	if !reused {
		t.Logf("the server did not assign id %d again after its crash (the first after it: %d)", xid, first)
	}
	p.stall(false)
	if err := <-wErr; err == nil { // else it failed: it says no more
		if got := stored(t, s, "a"); !slices.Equal(got, []string{"0:x"}) {
			t.Fatalf("the write reported success, and a holds %q: its transaction's id, given again after the crash to a transaction that committed, was taken for its own", got)
		}
	}
	return reused
}
