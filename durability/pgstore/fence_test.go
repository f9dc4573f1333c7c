package pgstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// A claim key follows the rule names follow: empty or over MaxNameLen
// bytes, it is refused with ErrInvalidName before it reaches the server
// (which would refuse a key over its B-tree row limit, about 2700 bytes,
// on every attempt), by Claim and by Epoch alike, and the error does not
// quote the whole key.
func TestClaim_KeyOverMaxNameLen(t *testing.T) {
	s := open(t, nil)
	defer s.Close()
	ctx := t.Context()
	if c, err := s.Claim(ctx, strings.Repeat("k", pgstore.MaxNameLen)); err != nil || c.Epoch() != 1 {
		t.Fatalf("Claim of a key of MaxNameLen bytes: %v", err)
	}
	if e, err := s.Epoch(ctx, strings.Repeat("k", pgstore.MaxNameLen)); err != nil || e != 1 {
		t.Fatalf("Epoch of a key of MaxNameLen bytes: %d, %v; want 1", e, err)
	}
	for _, use := range []struct {
		what string
		call func(key string) error
	}{
		{"Claim", func(key string) error { _, err := s.Claim(ctx, key); return err }},
		{"Epoch", func(key string) error { _, err := s.Epoch(ctx, key); return err }},
	} {
		for _, n := range []int{pgstore.MaxNameLen + 1, 3000, 1 << 20} {
			err := use.call(strings.Repeat("k", n))
			se := checkCause(t, err, durability.ErrInvalidName)
			if se.Op != pgstore.OpClaim || durability.IsRetryable(err) {
				t.Errorf("%s of a %d-byte key: %+v", use.what, n, se)
			}
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				t.Errorf("%s of a %d-byte key reached the server: %v", use.what, n, pe)
			}
			if msg := err.Error(); len(msg) > 200 {
				t.Errorf("%s of a %d-byte key: error of %d bytes quotes the key: %.120s…", use.what, n, len(msg), msg)
			}
		}
		checkCause(t, use.call(""), durability.ErrInvalidName)
	}
}
