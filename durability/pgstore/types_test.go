package pgstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// A fences table whose epoch column an operator made an integer (not the
// bigint the store creates) still has its claims read: the epoch the
// server returns is decoded by its type, not taken for a bigint by its
// length.
func TestClaim_IntegerEpochColumn(t *testing.T) {
	s, schema := smallStore(t)
	ctx := t.Context()
	sql(t, "ALTER TABLE "+schema+".fences ALTER COLUMN epoch TYPE integer")
	for want := uint64(1); want <= 2; want++ {
		c, err := s.Claim(ctx, "k")
		if err != nil {
			t.Fatalf("claim %d of an integer epoch: %v", want, err)
		}
		if c.Epoch() != want {
			t.Fatalf("claim epoch %d, want %d", c.Epoch(), want)
		}
		if err := c.PersistEvent(ctx, "a", want, []byte("x")); err != nil {
			t.Fatalf("write through claim %d: %v", want, err)
		}
	}
}

// An epoch column of a type that is no integer fails the claim with an
// error that names the column's type, not with a garbled number.
func TestClaim_EpochColumnOfOtherType(t *testing.T) {
	s, schema := smallStore(t)
	ctx := t.Context()
	sql(t, "ALTER TABLE "+schema+".fences ALTER COLUMN epoch TYPE numeric")
	_, err := s.Claim(ctx, "k")
	var se *durability.StoreError
	if !errors.As(err, &se) {
		t.Fatalf("claim of a numeric epoch: %v (%T), want a *durability.StoreError", err, err)
	}
	if !strings.Contains(err.Error(), "type OID 1700") || !strings.Contains(err.Error(), "bigint") {
		t.Fatalf("claim of a numeric epoch: %q does not name the column's type and the one wanted", err)
	}
}

// A claim whose statement was prepared before the fences table changed
// under the store is refused by the server (it did nothing: the epoch was
// not raised) and runs once more on a fresh connection, raising the epoch
// once.
func TestAlteredTable_ClaimRecovers(t *testing.T) {
	// One connection at a time: the claim before the change prepared its statement
	// on the connection the claim after it takes.
	schema := freshSchema()
	s := open(t, &pgstore.Options{Schema: schema, Committers: 1, MaxConns: 2})
	defer s.Close()
	ctx := t.Context()
	if _, err := s.Claim(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	before, err := s.Epoch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	dialed := pgstore.PoolNewConns(s)
	sql(t, "ALTER TABLE "+schema+".fences ALTER COLUMN epoch TYPE integer")
	c, err := s.Claim(ctx, "k")
	if err != nil {
		t.Fatalf("claim after the fences table was altered: %v", err)
	}
	if c.Epoch() != before+1 {
		t.Fatalf("claim epoch %d after the table was altered, want %d (raised once)", c.Epoch(), before+1)
	}
	if pgstore.PoolNewConns(s) == dialed {
		t.Fatal("the claim after the table was altered ran on the connection it had prepared on, and was not refused: the test tests nothing")
	}
}

// A Salvage whose statements were prepared before a table changed under
// the store is refused by the server (it dropped nothing) and runs once
// more on a fresh connection.
func TestAlteredTable_SalvageRecovers(t *testing.T) {
	// One connection at a time, as in TestAlteredTable_ClaimRecovers.
	schema := freshSchema()
	s := open(t, &pgstore.Options{Schema: schema, Committers: 1, MaxConns: 2})
	defer s.Close()
	ctx := t.Context()
	if err := s.PersistEvents(ctx, "a", 1, [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Salvage(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	dialed := pgstore.PoolNewConns(s)
	sql(t, "ALTER TABLE "+schema+".events ALTER COLUMN crc TYPE bigint")
	sql(t, "ALTER TABLE "+schema+".snapshots ALTER COLUMN crc TYPE bigint")
	out, err := s.Salvage(ctx, "a")
	if err != nil {
		t.Fatalf("Salvage after the tables were altered: %v", err)
	}
	if out.Dropped != 0 {
		t.Fatalf("Salvage after the tables were altered dropped %d records, want none", out.Dropped)
	}
	if pgstore.PoolNewConns(s) == dialed {
		t.Fatal("the Salvage after the tables were altered was not refused: the test tests nothing")
	}
}
