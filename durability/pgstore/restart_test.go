package pgstore_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// TestRestartedServer_OneBatchFails: a server restart (or failover, or an
// operator ending sessions) kills every connection of the pool at once
// (SQLSTATE 57P01 admin_shutdown, 57P02 crash_shutdown, class 08). The
// batch in flight may fail; the next write must reach the server on a
// new connection, as after a 25006 refusal, and not fail once more for
// each dead connection left in the pool: each failed write is a durable
// actor's failure, and a pool's worth of them in a row spends its
// supervisor's restarts.
func TestRestartedServer_OneBatchFails(t *testing.T) {
	ctx := t.Context()
	schema := freshSchema()
	open(t, &pgstore.Options{Schema: schema}).Close()
	appDSN := appRole(t, dsn, schema)
	s, err := pgstore.Open(ctx, appDSN, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const conns = 8
	if err := pgstore.OpenConns(ctx, s, conns); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistEvent(ctx, "a", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// What a restart does to the store's sessions (and no other test's).
	sql(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", "app_"+schema)
	first := s.PersistEvent(ctx, "a", 1, []byte("x"))
	t.Logf("first write after the restart: %v", first)
	var failed []error
	for i := uint64(2); i < 2+conns; i++ {
		if err := s.PersistEvent(ctx, "a", i, []byte("x")); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("after the first write on a restarted server, %d of the next %d writes failed (the pool held %d dead connections); the first: %v",
			len(failed), conns, conns, failed[0])
	}
}
