package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/internal/syncbuf"
)

// A server that takes no writes (SQLSTATE 25006 read_only_sql_transaction:
// a standby, or a primary demoted to one) fails the write or claim, not for
// good, and the store drops its connections: once new connections reach a
// server that takes writes (behind a proxy or a name moved to the new
// primary), the next call succeeds at once, not after the old connections
// have aged out of the pool. Here the role's sessions are read-only when
// they start while the role is set so: the store's connections stay
// read-only after the setting is undone, and only new ones take writes.
func TestReadOnlyServer_ConnectionsDropped(t *testing.T) {
	for _, c := range []struct {
		what string
		call func(ctx context.Context, s *pgstore.Store) error
	}{
		{"PersistEvent", func(ctx context.Context, s *pgstore.Store) error {
			return s.PersistEvent(ctx, "a", 0, []byte("x"))
		}},
		{"Claim", func(ctx context.Context, s *pgstore.Store) error {
			_, err := s.Claim(ctx, "k")
			return err
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			ctx := t.Context()
			schema := freshSchema()
			open(t, &pgstore.Options{Schema: schema}).Close()
			appDSN := appRole(t, dsn, schema)
			role := "app_" + schema
			sql(t, "ALTER ROLE "+role+" SET default_transaction_read_only = on")
			s, err := pgstore.Open(ctx, appDSN, &pgstore.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Epoch(ctx, "k"); err != nil { // reads go on
				t.Fatal(err)
			}
			const conns = 3
			if err := pgstore.OpenConns(ctx, s, conns); err != nil {
				t.Fatal(err)
			}

			err = c.call(ctx, s)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "25006" || durability.IsPermanent(err) {
				t.Fatalf("%s on a read-only server: %v, want SQLSTATE 25006, not permanent", c.what, err)
			}
			if n := pgstore.PoolConns(s); n != 0 {
				t.Errorf("after %s on a read-only server, the pool holds %d of its %d connections, want none", c.what, n, conns)
			}
			sql(t, "ALTER ROLE "+role+" RESET default_transaction_read_only")
			if err := c.call(ctx, s); err != nil {
				t.Fatalf("%s once new connections take writes: %v (the store kept its read-only connections)", c.what, err)
			}
		})
	}
}

// readOnlyStore opens a store, with one committer and a logger writing
// warnings to the buffer returned, as a role whose sessions are read-only.
func readOnlyStore(t *testing.T) (*pgstore.Store, *syncbuf.Buffer) {
	t.Helper()
	schema := freshSchema()
	open(t, &pgstore.Options{Schema: schema}).Close()
	appDSN := appRole(t, dsn, schema)
	sql(t, "ALTER ROLE app_"+schema+" SET default_transaction_read_only = on")
	var logs syncbuf.Buffer
	s, err := pgstore.Open(t.Context(), appDSN, &pgstore.Options{Schema: schema, Committers: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &logs
}

// storm runs writers concurrent writes of an event each, and readers
// concurrent readers of a few snapshots each, and returns their errors.
func storm(ctx context.Context, s *pgstore.Store, writers, readers int) (writeErrs, readErrs []error) {
	var wg sync.WaitGroup
	writeErrs, readErrs = make([]error, writers), make([]error, readers)
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			writeErrs[i] = s.PersistEvent(ctx, fmt.Sprintf("a%d", i), 0, []byte("x"))
		})
	}
	for i := range readers {
		wg.Go(func() {
			<-start
			for range 8 {
				if _, _, err := s.GetSnapshot(ctx, fmt.Sprintf("a%d", i)); err != nil {
					readErrs[i] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return writeErrs, readErrs
}

// A batch that a read-only server refuses fails as a whole: the refusal is
// the server's, not one write's, so retrying each write alone would only
// fail each again, and reset the pool and dial a connection for each (a
// batch of thousands during a failover). The pool is reset once for the
// batch. Reads go on meanwhile.
func TestReadOnlyServer_BatchFailsWhole(t *testing.T) {
	ctx := t.Context()
	s, logs := readOnlyStore(t)
	const writers = 32
	before := pgstore.PoolNewConns(s)
	errs, _ := storm(ctx, s, writers, 0)
	for i, err := range errs {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "25006" || durability.IsPermanent(err) {
			t.Fatalf("write %d: %v, want SQLSTATE 25006, not permanent", i, err)
		}
	}
	// Each failed commit resets the pool once and the next one dials a
	// connection: as many as there were batches, far fewer than writes
	// when they come together.
	dialed := pgstore.PoolNewConns(s) - before
	out := logs.String()
	resets := strings.Count(out, "dropping its connections")
	alone := strings.Count(out, `msg="pgstore commit failed" name=`)
	if alone > 0 || dialed > writers/2 || resets > writers/2 {
		t.Errorf("%d writes refused by a read-only server: %d connections dialed, %d pool resets, %d writes retried alone; want at most %d, %d and none",
			writers, dialed, resets, alone, writers/2, writers/2)
	}

	errs, readErrs := storm(ctx, s, writers, 4)
	for i, err := range errs {
		if err == nil {
			t.Errorf("write %d committed on a read-only server", i)
		}
	}
	for i, err := range readErrs {
		if err != nil {
			t.Errorf("read %d while writes were refused: %v", i, err)
		}
	}
}
