package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/durabilitytest"
)

// campaignBig is an event of actor "campaign-big" that campaignFile
// leaves in the log with the second phase: a log value large enough to
// be held by a nested bucket (see [putLogValue]).
var campaignBig = bytes.Repeat([]byte("campaign-big-value:"), 2*bigLogValue/19)

// campaignFile writes a store of sessions sessions of 10 events: the
// first phase of the dataset checkpointed, the second (the last events
// of one session in ten) left in the log by a crash, with campaignBig. It
// returns the dataset and the file's bytes.
func campaignFile(t testing.TB, sessions int) (*durabilitytest.Dataset, []byte) {
	t.Helper()
	return campaignFileOf(t, sessions, 10)
}

// campaignFileOf is campaignFile of sessions of events events.
func campaignFileOf(t testing.TB, sessions, events int) (*durabilitytest.Dataset, []byte) {
	t.Helper()
	d := durabilitytest.NewDataset(42, sessions, events)
	d.Tail = max(sessions/10, 1)
	path := filepath.Join(t.TempDir(), "campaign.db")
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Write(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	d.Write(t, s, 1)
	if err := s.PersistEvent(t.Context(), "campaign-big", 0, campaignBig); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return d, b
}

// campaign opens each damaged version of a file that mutate makes and
// reads every session back: Open fails with a *durability.StoreError, or
// every read returns exactly what was written or fails saying the data is
// damaged. Nothing panics (a panic fails the test binary) and no read
// returns different data.
func campaign(t *testing.T, d *durabilitytest.Dataset, orig []byte, seeds int, mutate func(rng *rand.Rand, b []byte) ([]byte, string)) {
	t.Helper()
	dir := memDir(t)
	var mu sync.Mutex
	var refused, opened, intact int
	var total durabilitytest.Outcome
	reasons := map[string]int{}
	one := func(t *testing.T, seed uint64, path string) {
		rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
		b, what := mutate(rng, bytes.Clone(orig))
		if err := rewrite(path, b); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			var se *durability.StoreError
			if !errors.As(err, &se) {
				t.Errorf("seed %d (%s): Open: %v, not a *durability.StoreError", seed, what, err)
			}
			mu.Lock()
			refused++
			reasons[openReason(err)]++
			mu.Unlock()
			return
		}
		o, problems := d.Check(t, s)
		var big []byte
		if err := s.GetEvents(t.Context(), "campaign-big", 0, 0, func(_ uint64, d []byte) error { big = bytes.Clone(d); return nil }); err == nil && !bytes.Equal(big, campaignBig) {
			t.Errorf("seed %d (%s): the big log value read back as %d bytes, not the %d written", seed, what, len(big), len(campaignBig))
		} else if err != nil && !errors.Is(err, durability.ErrDamaged) {
			t.Errorf("seed %d (%s): reading the big log value: %v, not damage", seed, what, err)
		}
		if err := s.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
			t.Errorf("seed %d (%s): Close: %v", seed, what, err)
		}
		if o.Different+o.Other > 0 {
			t.Errorf("seed %d (%s): %+v: %s", seed, what, o, strings.Join(problems, "; "))
		}
		// What the writable Open that found damage wrote (a rebuilt
		// freelist, a checkpoint) must not hide it from the next Open:
		// nothing that reads may differ from what was written.
		if o.Damaged == 0 {
		} else if s, err := Open(path, &Options{NoSync: true}); err == nil {
			o2, problems := d.Check(t, s)
			if err := s.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
				t.Errorf("seed %d (%s): Close after a reopen: %v", seed, what, err)
			}
			if o2.Different+o2.Other > 0 {
				t.Errorf("seed %d (%s): reopened: %+v: %s", seed, what, o2, strings.Join(problems, "; "))
			}
			o.Different += o2.Different
			o.Other += o2.Other
		} else if !errors.Is(err, durability.ErrDamaged) {
			t.Errorf("seed %d (%s): reopen: %v, not damage", seed, what, err)
		}
		mu.Lock()
		defer mu.Unlock()
		opened++
		if o.Damaged == 0 {
			intact++
		}
		total.Exact += o.Exact
		total.Damaged += o.Damaged
		total.Different += o.Different
		total.Other += o.Other
	}
	// Four parallel runs of a quarter of the seeds each, each in a file
	// of its own that every seed of the run writes over.
	const parts = 4
	step := campaignSeeds(t, seeds)
	tried := 0
	for seed := 0; seed < seeds; seed += step {
		tried++
	}
	t.Run("seeds", func(t *testing.T) {
		for p := range parts {
			t.Run(fmt.Sprint(p), func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(dir, fmt.Sprintf("part-%d.db", p))
				for seed := uint64(p * step); seed < uint64(seeds); seed += uint64(parts * step) {
					one(t, seed, path)
				}
			})
		}
	})
	t.Logf("%d damaged files: %d refused at Open, %d opened (%d of them read back whole); reads: %+v", tried, refused, opened, intact, total)
	t.Logf("Open refusals: %v", reasons)
	if refused+opened != tried {
		t.Errorf("%d of %d damaged files tried", refused+opened, tried)
	}
	if total.Different != 0 {
		t.Errorf("%d reads returned different data without an error", total.Different)
	}
}

// campaignSeeds is how many of a campaign's seeds run: all of them in a
// plain test run (CI's "go test ./..." runs them all, each campaign in
// well under a minute), every fifth seed under the race
// detector or -short, where they check the same assertions ten times
// slower and CI's race run must stay short. The race detector adds
// nothing to a campaign that opens each damaged file from one goroutine;
// the seeds it runs are spread over the whole range.
func campaignSeeds(t *testing.T, seeds int) (step int) {
	if raceDetector || testing.Short() {
		step = 5
		t.Logf("race detector or -short: %d of %d seeds (every %dth)", (seeds+step-1)/step, seeds, step)
		return step
	}
	return 1
}

// rewrite makes the file at path hold b: it writes over the pages the
// file holds (a campaign's previous damaged file), which costs less than
// a new file, whose pages the system must allocate and later free.
func rewrite(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	return errors.Join(err, f.Close())
}

// memDir returns a temporary directory in memory (/dev/shm) when the
// system has one, else on disk: a campaign writes and opens hundreds of
// files, and the disk adds only time.
func memDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "boltstore-campaign-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// openReason shortens an Open error to what kind of damage it found.
func openReason(err error) string {
	var de *durability.DamageError
	if errors.As(err, &de) {
		return de.What
	}
	return "other: " + err.Error()[:min(len(err.Error()), 60)]
}

// TestCampaign_DamagedFiles (issue: stores never crash the host) damages a
// real store file with an unreplayed log in 320 seeded ways: truncation,
// zeroed pages, pages of random bytes, and a few random bytes changed.
func TestCampaign_DamagedFiles(t *testing.T) {
	t.Parallel()
	d, orig := campaignFile(t, 40)
	const page = 4096
	campaign(t, d, orig, 320, func(rng *rand.Rand, b []byte) ([]byte, string) {
		switch rng.IntN(4) {
		case 0:
			n := rng.IntN(len(b))
			if rng.IntN(2) == 0 {
				n -= n % page
			}
			return b[:n], fmt.Sprintf("truncated to %d", n)
		case 1:
			p := rng.IntN(len(b) / page)
			clear(b[p*page : (p+1)*page])
			return b, fmt.Sprintf("page %d zeroed", p)
		case 2:
			p := rng.IntN(len(b) / page)
			for i := p * page; i < (p+1)*page; i++ {
				b[i] = byte(rng.Uint32())
			}
			return b, fmt.Sprintf("page %d random", p)
		default:
			var at []int
			for range 1 + rng.IntN(8) {
				i := rng.IntN(len(b))
				b[i] ^= byte(1 + rng.IntN(255))
				at = append(at, i)
			}
			return b, fmt.Sprintf("bytes %v changed", at)
		}
	})
}

// TestCampaign_ByteFlips (issue: damaged state is never served) changes
// one byte at 500 seeded offsets of a real store file holding 200
// sessions, part checkpointed and part in an unreplayed log.
func TestCampaign_ByteFlips(t *testing.T) {
	t.Parallel()
	d, orig := campaignFile(t, 200)
	campaign(t, d, orig, 500, func(rng *rand.Rand, b []byte) ([]byte, string) {
		i := rng.IntN(len(b))
		b[i] ^= byte(1 + rng.IntN(255))
		return b, fmt.Sprintf("byte %d changed", i)
	})
}

// TestCampaign_BranchPointers (issue: damaged state is never served)
// points one element of a branch page in use of a real store file (60
// sessions of 150 events, whose buckets of events span pages), at 400
// seeded choices, to another page below the high water mark: a page of
// another actor, of the log, of the actors bucket, a free one, one of
// the actor's own. However the page checks from the side of the broken
// pointer, no read returns another actor's data, nor old data of its
// own, as its own.
func TestCampaign_BranchPointers(t *testing.T) {
	t.Parallel()
	d, orig := campaignFileOf(t, 60, 150)
	const page = 4096
	elems := branchElements(t, orig, page)
	if len(elems) < 20 {
		t.Fatalf("the file has %d branch elements, too few to damage", len(elems))
	}
	campaign(t, d, orig, 400, func(rng *rand.Rand, b []byte) ([]byte, string) {
		at := elems[rng.IntN(len(elems))]
		to := uint64(2 + rng.IntN(len(b)/page-2))
		was := binary.LittleEndian.Uint64(b[at:])
		binary.LittleEndian.PutUint64(b[at:], to)
		return b, fmt.Sprintf("branch element at byte %d points to page %d, not %d", at, to, was)
	})
}

// branchElements returns the offsets in the store file b of the page ids
// of the elements of its branch pages in use (bbolt's Tx.Page tells the
// pages the freelist lists, whose stale branches lead nowhere).
func branchElements(t *testing.T, b []byte, page int) []int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "branches.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var elems []int
	err = db.View(func(tx *bolt.Tx) error {
		for p := 2; p < len(b)/page; p++ {
			info, err := tx.Page(p)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "branch" {
				for i := range info.Count {
					elems = append(elems, p*page+pageHeaderSize+16*i+8)
				}
			}
			if info.Type != "free" {
				p += info.OverflowCount
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return elems
}
