package pgstore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// A migration (or an operator) that changes the type of a column the
// store reads, under a running store, leaves the store's connections with
// statements prepared for the old type: PostgreSQL refuses to run them
// ("cached plan must not change result type"). The store drops them and
// reads again; no read fails for it, and none returns other data.
func TestAlteredTable_ReadsRecover(t *testing.T) {
	const name = "altered"
	s, schema := smallStore(t)
	ctx := t.Context()
	if err := s.PersistEvents(ctx, name, 1, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistSnapshot(ctx, name, 1, []byte("snap")); err != nil {
		t.Fatal(err)
	}
	if err := s.PersistEvent(ctx, "fence", 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Every connection of the pool prepares the reads.
	read := func() error {
		if _, _, err := s.GetSnapshot(ctx, name); err != nil {
			return err
		}
		var got []string
		err := s.GetEvents(ctx, name, 0, 0, func(_ uint64, d []byte) error {
			got = append(got, string(d))
			return nil
		})
		if err == nil && !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("events read %q, want [a b]", got)
		}
		return err
	}
	for range 3 {
		if err := pgstore.OpenConns(ctx, s, 3); err != nil {
			t.Fatal(err)
		}
		if err := read(); err != nil {
			t.Fatal(err)
		}
	}
	sql(t, "ALTER TABLE "+schema+".snapshots ALTER COLUMN crc TYPE bigint")
	sql(t, "ALTER TABLE "+schema+".events ALTER COLUMN crc TYPE bigint")
	for i := range 4 {
		if err := read(); err != nil {
			var se *durability.StoreError
			t.Fatalf("read %d after the tables were altered: %v (a *StoreError: %v)", i, err, errors.As(err, &se))
		}
	}
	snap, ok, err := s.GetSnapshot(ctx, name)
	if err != nil || !ok || snap.Index != 1 || string(snap.Data) != "snap" {
		t.Fatalf("GetSnapshot = %d %q %v %v, want 1 \"snap\"", snap.Index, snap.Data, ok, err)
	}
	// Writes go on too.
	if err := s.PersistEvent(ctx, name, 3, []byte("c")); err != nil {
		t.Fatalf("write after the tables were altered: %v", err)
	}
}

// A schema dropped and set up again (by a later Open) under a running
// store, with the same tables: the statements the store prepared run on
// the new tables (PostgreSQL plans them again), for reads, writes and
// claims alike.
func TestRecreatedSchema_StatementsRunOnNewTables(t *testing.T) {
	const name = "recreated"
	s, schema := smallStore(t)
	ctx := t.Context()
	if err := s.PersistEvent(ctx, name, 1, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetSnapshot(ctx, name); err != nil {
		t.Fatal(err)
	}
	sql(t, "DROP SCHEMA "+schema+" CASCADE")
	again := open(t, &pgstore.Options{Schema: schema})
	again.Close()
	c, err := s.Claim(ctx, name)
	if err != nil {
		t.Fatalf("Claim after the schema was set up again: %v", err)
	}
	if c.Epoch() != 1 {
		t.Fatalf("claim epoch %d on the new tables, want 1", c.Epoch())
	}
	if err := c.PersistEvent(ctx, name, 2, []byte("new")); err != nil {
		t.Fatalf("write after the schema was set up again: %v", err)
	}
	if got := stored(t, s, name); !slices.Equal(got, []string{"2:new"}) {
		t.Fatalf("stored %q, want [2:new]", got)
	}
}

// smallStore opens a store of three connections on a fresh schema,
// closed when the test ends, and returns it with its schema.
func smallStore(t *testing.T) (*pgstore.Store, string) {
	t.Helper()
	schema := freshSchema()
	s := open(t, &pgstore.Options{Schema: schema, Committers: 1, MaxConns: 3})
	t.Cleanup(func() { s.Close() })
	return s, schema
}
