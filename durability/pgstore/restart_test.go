package pgstore_test

import (
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// TestRestartedServer_WritesSucceed: a server restart (or failover, or an
// operator ending sessions) kills every connection of the pool at once
// (SQLSTATE 57P01 admin_shutdown, 57P02 crash_shutdown, class 08). No
// write fails for it, not even the first: the write that draws a dead
// connection resets the pool and runs once more on a fresh connection
// (what it stores is checked against what the rows hold, so that running
// it twice is safe), and the next ones find no dead connection left. Each
// failed write is a durable actor's failure, and a pool's worth of them in
// a row spends its supervisor's restarts.
func TestRestartedServer_WritesSucceed(t *testing.T) {
	ctx := t.Context()
	s, schema := storeOfOwnRole(t)
	const conns = 8
	if err := pgstore.OpenConns(ctx, s, conns); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistEvent(ctx, "a", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// What a restart does to the store's sessions (and no other test's),
	// waiting until they are gone.
	sql(t, "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = $1", "app_"+schema)
	var failed []error
	for i := uint64(1); i < 2+conns; i++ {
		if err := s.PersistEvent(ctx, "a", i, []byte("x")); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("after a restart, %d of %d writes failed (the pool held %d dead connections); the first: %v",
			len(failed), 1+conns, conns, failed[0])
	}
	if got := stored(t, s, "a"); len(got) != 2+conns {
		t.Errorf("after a restart, %d events stored, want %d", len(got), 2+conns)
	}
}

// TestRestartedServer_ReadsSucceed: reads after a server restart (here,
// the store's sessions ended, as a restart ends them) do not fail on the
// dead connections left in the pool: the first read that draws one resets
// the pool, as a write does, and runs once more on a fresh connection (a
// read has no side effects, and hands nothing to its caller before it
// succeeds). Each failed read is a durable actor's failed recovery, so
// none may fail, not even the first.
func TestRestartedServer_ReadsSucceed(t *testing.T) {
	ctx := t.Context()
	s, schema := storeOfOwnRole(t)
	if err := s.PersistEvents(ctx, "a", 0, [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistSnapshot(ctx, "b", 3, []byte("s")); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		read func() error
	}{
		{"GetEvents", func() error {
			n := 0
			err := s.GetEvents(ctx, "a", 0, 0, func(uint64, []byte) error { n++; return nil })
			if err == nil && n != 2 {
				t.Errorf("GetEvents read %d events, want 2", n)
			}
			return err
		}},
		{"GetSnapshot", func() error {
			snap, ok, err := s.GetSnapshot(ctx, "b")
			if err == nil && (!ok || snap.Index != 3 || string(snap.Data) != "s") {
				t.Errorf("GetSnapshot = %v, %v, want index 3, data s", snap, ok)
			}
			return err
		}},
		{"Epoch", func() error {
			e, err := s.Epoch(ctx, "k")
			if err == nil && e != c.Epoch() {
				t.Errorf("Epoch = %d, want %d", e, c.Epoch())
			}
			return err
		}},
	}
	const conns = 8
	for _, r := range reads {
		if err := pgstore.OpenConns(ctx, s, conns); err != nil {
			t.Fatal(err)
		}
		// What a restart does to the store's sessions (and no other
		// test's), waiting until they are gone.
		sql(t, "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = $1", "app_"+schema)
		var failed []error
		for range 1 + conns {
			if err := r.read(); err != nil {
				failed = append(failed, err)
			}
		}
		if len(failed) > 0 {
			t.Errorf("after a restart, %d of %d calls of %s failed (the pool held %d dead connections); the first: %v",
				len(failed), 1+conns, r.name, conns, failed[0])
		}
	}
}

// storeOfOwnRole is a store on a fresh schema, connected as a role of its
// own (app_<schema>), so that a test may end that role's sessions, as a
// server restart ends them, without touching any other test's; it is
// closed when the test ends.
func storeOfOwnRole(t *testing.T) (*pgstore.Store, string) {
	t.Helper()
	schema := freshSchema()
	open(t, &pgstore.Options{Schema: schema}).Close()
	s, err := pgstore.Open(t.Context(), appRole(t, dsn, schema), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, schema
}
