package pgstore_test

import (
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
	ctx := t.Context()
	srv, err := pgtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	p, proxied := startProxy(t, srv.DSN)
	s, err := pgstore.Open(ctx, proxied, &pgstore.Options{Schema: freshSchema(), Committers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.stop()
		_ = s.Close()
	}()
	c, err := pgx.Connect(ctx, srv.DSN)
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
	c.Close(ctx)
	for {
		if c, err = pgx.Connect(ctx, srv.DSN); err == nil {
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
	reused := false
	for id := int64(0); id < xid; {
		if err := c.QueryRow(ctx, "SELECT pg_catalog.txid_current()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		reused = reused || id == xid
	}
	if !reused {
		t.Fatalf("the server did not assign id %d again after its crash: the test shows nothing", xid)
	}
	p.stall(false)
	err = <-wErr
	got := stored(t, s, "a")
	if err == nil && !slices.Equal(got, []string{"0:x"}) {
		t.Fatalf("the write reported success, and a holds %q: its transaction's id, given again after the crash to a transaction that committed, was taken for its own", got)
	}
	t.Logf("write: %v; a holds %q", err, got)
}
