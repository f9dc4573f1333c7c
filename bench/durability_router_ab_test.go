package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// TestABSidesVerifyTheirSetting checks that closing the sides of an
// interleaved checksums run catches a store written with checksums on
// that received a record while they were off (work of a slice that went
// on into the other side's turn), and passes stores each written with its
// own setting.
func TestABSidesVerifyTheirSetting(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
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

// TestChecksumRowsHaveAA runs figure 4's checksum rows once each with tiny
// sizes and checks that every one with a goal has its A/A row (the same
// case with checksums on both sides, measured the same way: the spread
// that says whether the row can resolve its goal), and that the rows
// whose wall time waits on fsync (persisting with it, the routers'
// chunks) are timed in CPU time, where what checksums add is not drowned
// by the disk.
func TestChecksumRowsHaveAA(t *testing.T) {
	var out, progress bytes.Buffer
	if err := run([]string{"-smoke", "-no-peers", "-json", "-filter", checksumRows}, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	rows := map[string]Row{}
	for _, r := range rep.Rows {
		checkRow(t, r)
		rows[r.Case] = r
	}
	goals := 0
	for name, r := range rows {
		if r.Goal == "info" {
			continue
		}
		goals++
		aa, ok := rows[strings.Replace(name, "checksums on vs off", "checksums on vs on (A/A)", 1)]
		switch {
		case !ok:
			t.Errorf("%q has no A/A row", name)
		case aa.Unit != r.Unit:
			t.Errorf("%q is in %s, its A/A row in %s", name, r.Unit, aa.Unit)
		}
		fsyncBound := strings.HasPrefix(name, "store: persist, bbolt, ") || strings.HasPrefix(name, "router chunks/s, ")
		if fsyncBound && !strings.Contains(r.Unit, "per CPU") {
			t.Errorf("%q is timed in %s, not CPU time", name, r.Unit)
		}
	}
	if goals < 5 {
		t.Errorf("%d checksum rows with a goal, want the 5 of figure 4 at least:\n%s", goals, out.String())
	}
}

// TestTurnStorePassesToItsTurn checks that a turnStore writes to, and
// reads from, the store it was last pointed to and no other: the chunks
// row's routers serve both sides through it, and a write that reached the
// other side's store would be measured on the wrong side.
func TestTurnStorePassesToItsTurn(t *testing.T) {
	ctx := context.Background()
	sides, err := newABSides(t.TempDir(), checksumsAA, nil, func(int, *abSide) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeABSides(sides); err != nil {
			t.Error(err)
		}
	}()
	turn := &turnStore{}
	for i, s := range sides {
		turn.to(s.store)
		if err := turn.PersistEvent(ctx, "actor", uint64(i), []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range sides {
		var got []uint64
		if err := s.store.GetEvents(ctx, "actor", 0, 0, func(index uint64, _ []byte) error {
			got = append(got, index)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []uint64{uint64(i)}) {
			t.Errorf("side %d's store holds events %v, want [%d]", i, got, i)
		}
	}
	var read []uint64
	if err := turn.GetEvents(ctx, "actor", 0, 0, func(index uint64, _ []byte) error {
		read = append(read, index)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(read, []uint64{1}) {
		t.Errorf("the turn store, pointed to side 1, reads events %v, want [1]", read)
	}
}
