package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// Checksums on against off, measured in one run: the two sides alternate
// at fine grain (a slice of work each, in pairs, which side of a pair goes
// first drawn at random) and the time of each side is summed over its
// slices, so that a change in the machine's load or the disk's speed
// during a round falls on both sides alike instead of on whichever side
// ran then. Each row measures one such run per round; its baseline's
// figure is the off side of that same run.

// abTotals is what an interleaved run measured of each side: [0] with
// checksums on, [1] with them off.
type abTotals struct {
	items  [2]int           // operations completed (events, reads)
	wall   [2]time.Duration // wall time spent in the side's slices
	cpu    [2]time.Duration // the process's CPU time during them
	allocs [2]uint64        // heap allocations during them
}

// abSlice runs one slice of work with checksums on or off (the switch is
// already set) and returns how many operations it completed.
type abSlice func(on bool) (int, error)

// runAB runs pairs of slices, one with checksums on and one off, each
// pair in random order, and returns the totals (see [runPairs]).
func runAB(b *testing.B, slice abSlice, until time.Duration) abTotals {
	b.Helper()
	defer benchhook.ChecksumsOff.Store(false)
	side := func(on bool) func() (int, error) {
		return func() (int, error) {
			benchhook.ChecksumsOff.Store(!on)
			return slice(on)
		}
	}
	return runPairs(b, [2]func() (int, error){side(true), side(false)}, until)
}

// runPairs runs pairs of slices, one of each side, and returns the
// totals: b.N pairs, or if until is positive as many as fit in until (at
// least one). Which side of a pair goes first is drawn at random, not
// alternated: work that comes back every few slices (a store's checkpoint
// every few pairs, a collection every so many) would otherwise fall at the
// same place in the order every time, and an order kept for a whole run
// can favour one side by several per cent where both sides do the same
// work (an A/A run, both with checksums). Allocations are counted with
// runtime/metrics, which does not stop the world (the count lags by what
// the Ps' caches hold, a few dozen objects, far below a slice's).
func runPairs(b *testing.B, slices [2]func() (int, error), until time.Duration) abTotals {
	b.Helper()
	var t abTotals
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	measure := func(side int) {
		metrics.Read(allocs)
		before := allocs[0].Value.Uint64()
		cpu, start := processCPU(), time.Now()
		n, err := slices[side]()
		wall, used := time.Since(start), processCPU()-cpu
		metrics.Read(allocs)
		if err != nil {
			b.Fatal(err)
		}
		t.items[side] += n
		t.wall[side] += wall
		t.cpu[side] += used
		t.allocs[side] += allocs[0].Value.Uint64() - before
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; ; i++ {
		first := rand.IntN(2)
		measure(first)
		measure(1 - first)
		if until > 0 && time.Since(start) >= until || until <= 0 && i+1 >= b.N {
			return t
		}
	}
}

// checksumSides returns the two sides of a checksums-on-vs-off row whose
// figures come from one interleaved run per round (see [interleavedSides]).
func checksumSides(perCPU bool, until time.Duration, newSlice func(b *testing.B) (abSlice, func())) (ours, base side) {
	return interleavedSides([2]string{"checksums on", "checksums off"}, "ChecksumsAB", perCPU, until,
		func(b *testing.B, until time.Duration) abTotals {
			b.StopTimer()
			slice, done := newSlice(b)
			defer done()
			b.StartTimer()
			return runAB(b, slice, until)
		})
}

// interleavedSides returns the two sides (named names) of a row whose
// figures come from one interleaved run per round: whichever side the
// harness measures first in a round runs it (run, called by
// testing.Benchmark, makes a fresh setup for each of its calls) and keeps
// the other side's figure, which that side returns when it is measured
// next, in the same round. perCPU says whether a side's time is the
// process's CPU time in its slices (otherwise wall time). The run lasts
// until (so testing.Benchmark calls it once), or b.N pairs if until is 0
// (the smoke run: one pair). bench names the go test benchmark that
// shows a failed run's message.
func interleavedSides(names [2]string, bench string, perCPU bool, until time.Duration, run func(b *testing.B, until time.Duration) abTotals) (ours, base side) {
	measure := func() [2]sample {
		var t abTotals
		r := testing.Benchmark(func(b *testing.B) { t = run(b, until) })
		var out [2]sample
		for side, name := range names {
			d := t.wall[side]
			if perCPU {
				d = t.cpu[side]
			}
			switch {
			case r.N == 0 || t.items[0] == 0 || t.items[1] == 0:
				out[side].err = fmt.Errorf("%s: the interleaved run failed (run `go test -run '^$' -bench %s ./bench` for its message)", name, bench)
			case d <= 0:
				out[side].err = fmt.Errorf("%s: the process's CPU time cannot be read here", name)
			default:
				out[side] = sample{ns: float64(d.Nanoseconds()) / float64(t.items[side]), allocs: float64(t.allocs[side]) / float64(t.items[side])}
			}
		}
		return out
	}
	first, second := pairedSides(measure)
	return side{name: names[0], measure: first}, side{name: names[1], measure: second}
}

// pairedSides returns the measures of two sides whose figures come from
// one call of run: whichever is called first calls run and keeps the
// other's figure for its next call. The harness calls each once a round,
// in either order, so each round's two figures come from the same run.
func pairedSides(run func() [2]sample) (first, second func() sample) {
	var kept [2]*sample // figures of the last run not yet returned
	measure := func(side int) sample {
		if kept[side] == nil {
			figures := run()
			kept = [2]*sample{&figures[0], &figures[1]}
		}
		s := *kept[side]
		kept[side] = nil
		return s
	}
	return func() sample { return measure(0) }, func() sample { return measure(1) }
}

// persistAB returns the setup of an interleaved persist run: two bbolt
// stores in one folder, one written with checksums on and one with them
// off (each file is consistent), and a slice in which writers goroutines
// persist each bursts events, one at a time and waiting for each, to
// their own actor of the side's store.
func persistAB(writers, burst int, opts *boltstore.Options) func(b *testing.B) (abSlice, func()) {
	return func(b *testing.B) (abSlice, func()) {
		var stores [2]*boltstore.Store
		for i, name := range []string{"on.db", "off.db"} {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), name), opts)
			if err != nil {
				b.Fatal(err)
			}
			stores[i] = s
		}
		names := make([]string, writers)
		for w := range names {
			names[w] = fmt.Sprintf("stream-%03d", w)
		}
		next := [2][]uint64{make([]uint64, writers), make([]uint64, writers)} // each writer's next index, per store
		data := bytes.Repeat([]byte{'c'}, eventSize)
		ctx := context.Background()
		slice := func(on bool) (int, error) {
			side := 0
			if !on {
				side = 1
			}
			s := stores[side]
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for w := range writers {
				wg.Go(func() {
					for range burst {
						if err := s.PersistEvent(ctx, names[w], next[side][w], data); err != nil {
							errs[w] = err
							return
						}
						next[side][w]++
					}
				})
			}
			wg.Wait()
			return writers * burst, errors.Join(errs...)
		}
		return slice, func() {
			// Each store is closed (and checkpointed) as it was written.
			for side, s := range stores {
				benchhook.ChecksumsOff.Store(side == 1)
				if err := s.Close(); err != nil {
					b.Error(err)
				}
			}
			benchhook.ChecksumsOff.Store(false)
		}
	}
}

// readAB returns the setup of an interleaved read run: one bbolt file
// holding recoveryEntries events of one actor written with checksums, in
// batches of 1000, opened again (so read from the actor's bucket, the log
// checkpointed by Open), and a slice that reads them all
// back once, checking them or not.
func readAB(b *testing.B) (abSlice, func()) {
	path := filepath.Join(b.TempDir(), "reads.db")
	s, err := noSyncBolt(path)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte{'r'}, eventSize)
	}
	for i := 0; i < recoveryEntries; i += len(batch) {
		if err := s.PersistEvents(context.Background(), "router", uint64(i), batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = noSyncBolt(path); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	slice := func(bool) (int, error) {
		n := 0
		if err := s.GetEvents(ctx, "router", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil {
			return 0, err
		}
		if n != recoveryEntries {
			return 0, fmt.Errorf("read %d events, want %d", n, recoveryEntries)
		}
		return 1, nil
	}
	return slice, func() { s.Close() }
}

// abTime is how long an interleaved checksums run lasts: times
// -benchtime, or 0 (b.N pairs) where -benchtime is a count ("1x").
func (c *config) abTime(times int) time.Duration {
	d, err := time.ParseDuration(c.benchtime)
	if err != nil {
		return 0
	}
	return time.Duration(times) * d
}
