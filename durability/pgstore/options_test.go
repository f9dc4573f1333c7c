package pgstore_test

import (
	"math"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore"
)

// Out-of-range sizes are refused by Open with an error naming the option
// and its limit, without a panic and before anything is started (TestMain
// checks for leaked goroutines).
func TestOpen_OutOfRangeSizes(t *testing.T) {
	cases := []struct {
		o    pgstore.Options
		want string
	}{
		{pgstore.Options{MaxBatchSize: math.MaxInt}, "MaxBatchSize"},
		{pgstore.Options{MaxBatchSize: pgstore.MaxBatchSizeLimit + 1}, "MaxBatchSize"},
		{pgstore.Options{MaxConns: math.MaxInt}, "MaxConns"},
		{pgstore.Options{Committers: math.MaxInt}, "Committers"},
		{pgstore.Options{Committers: pgstore.CommittersLimit + 1}, "Committers"},
	}
	if over := int64(math.MaxInt32) + 1; over <= math.MaxInt { // int is wider than int32
		cases = append(cases, struct {
			o    pgstore.Options
			want string
		}{pgstore.Options{MaxConns: int(over)}, "MaxConns"})
	}
	for _, c := range cases {
		o := c.o
		o.Schema = freshSchema()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Open(%+v) panicked: %v", c.o, p)
				}
			}()
			s, err := pgstore.Open(t.Context(), dsn, &o)
			if err == nil {
				s.Close()
				t.Errorf("Open(%+v) accepted", c.o)
				return
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "maximum") {
				t.Errorf("Open(%+v): %v; want an error naming %s and its maximum", c.o, err, c.want)
			}
		}()
	}
	// The limits themselves are accepted.
	s := open(t, &pgstore.Options{MaxBatchSize: pgstore.MaxBatchSizeLimit, Committers: pgstore.CommittersLimit})
	if err := s.PersistEvent(t.Context(), "a", 0, []byte("x")); err != nil {
		t.Error(err)
	}
	s.Close()
}
