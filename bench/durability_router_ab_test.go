package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestABSidesVerifyTheirSetting checks that closing the sides of an
// interleaved checksums run catches a store written with checksums on
// that received a record while they were off (work of a slice that went
// on into the other side's turn), and passes stores each written with its
// own setting.
func TestABSidesVerifyTheirSetting(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	data := bytes.Repeat([]byte{'d'}, eventSize)
	for _, c := range []struct {
		name   string
		stray  bool // side 0 (checksums on) gets one event written with them off
		failed string
	}{
		{name: "each store with its setting"},
		{name: "a stray write", stray: true, failed: "side 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sides, err := newABSides(t.TempDir(), checksumsAB, nil, func(i int, s *abSide) error {
				return s.store.PersistEvent(ctx, "actor", 0, data)
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.stray {
				if err := withChecks(false, func() error { return sides[0].store.PersistEvent(ctx, "actor", 1, data) }); err != nil {
					t.Fatal(err)
				}
			}
			err = closeABSides(sides)
			switch {
			case c.failed == "" && err != nil:
				t.Errorf("closing: %v", err)
			case c.failed != "" && (err == nil || !strings.Contains(err.Error(), c.failed)):
				t.Errorf("closing: %v, want an error about %s", err, c.failed)
			}
		})
	}
}
