package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
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
