package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// Store-level durability figures (figure 4 until the streaming router's
// own figures are in): events persisted per second and the time to read
// back 10 000 pending entries.

// eventSize is the size of one persisted event, about one argument chunk
// with its framing.
const eventSize = 100

// recoveryEntries is how many pending entries the recovery benchmarks read.
const recoveryEntries = 10_000

// benchDiskFsync measures the disk's floor for durable writes: one 4 KiB
// overwrite plus fdatasync per op. A bbolt commit needs two of these (data
// pages, then the meta page).
func benchDiskFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync.probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := bytes.Repeat([]byte{1}, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.WriteAt(page, int64(i%16)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/fsync")
}

// storeOpener opens a fresh store for one benchmark run.
type storeOpener func(b *testing.B) durability.Store

func openBolt(opts *boltstore.Options) storeOpener {
	return func(b *testing.B) durability.Store {
		s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), opts)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
}

func openMem(*testing.B) durability.Store { return memstore.New(nil) }

// benchPersist reports events/s for ~100-byte events: writers each persist
// to their own actor name, one event at a time, waiting for each (as a
// persistent actor does).
func benchPersist(b *testing.B, writers int, open storeOpener) {
	s := open(b)
	defer s.Close()
	persistConcurrently(b, writers, func(ctx context.Context, name string, i uint64, data []byte) error {
		return s.PersistEvent(ctx, name, i, data)
	})
}

// benchBoltBatch is the baseline of benchPersist on bbolt: bbolt's own
// group commit (db.Batch) with its defaults, one bucket per writer.
func benchBoltBatch(b *testing.B, writers int) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "batch.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	persistConcurrently(b, writers, func(_ context.Context, name string, i uint64, data []byte) error {
		return db.Batch(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			return bk.Put(fmt.Appendf(nil, "%016x", i), data)
		})
	})
}

// benchProviderPersist persists through the protoactor adapter (Any
// encoding, panics on failure).
func benchProviderPersist(b *testing.B, writers int) {
	s := openBolt(nil)(b)
	defer s.Close()
	p, err := durability.NewProvider(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := wrapperspb.String(string(bytes.Repeat([]byte{'x'}, eventSize-40)))
	persistConcurrently(b, writers, func(_ context.Context, name string, i uint64, _ []byte) error {
		p.PersistEvent(name, int(i), msg)
		return nil
	})
}

// persistConcurrently runs b.N persist calls spread over writers
// goroutines, each with its own actor name and increasing indexes, and
// reports events/s and events per second of the process's CPU time
// (events/cpu-s).
func persistConcurrently(b *testing.B, writers int, persist func(ctx context.Context, name string, i uint64, data []byte) error) {
	b.Helper()
	ctx := context.Background()
	data := bytes.Repeat([]byte{'c'}, eventSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for w := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("stream-%03d", w)
			for i := uint64(0); next.Add(1) <= int64(b.N); i++ {
				if err := persist(ctx, name, i, data); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if cpu := processCPU() - cpu; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
	}
}

// fillRecovery writes recoveryEntries events of one actor ("router"), one
// snapshot per entry under its own name ("call-00042") and one snapshot
// holding all of them ("big").
func fillRecovery(s durability.Store) error {
	ctx := context.Background()
	data := bytes.Repeat([]byte{'r'}, eventSize)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	const writers = 64
	for w := range writers {
		wg.Go(func() {
			for i := w; i < recoveryEntries; i += writers {
				if err := s.PersistEvent(ctx, "router", uint64(i), data); err != nil {
					errs <- err
					return
				}
				if err := s.PersistSnapshot(ctx, fmt.Sprintf("call-%05d", i), 0, data); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return s.PersistSnapshot(ctx, "big", 0, bytes.Repeat(data, recoveryEntries))
}

// recoveryStore is a filled store shared by the read benchmarks.
type recoveryStore struct {
	name string
	s    durability.Store
}

// benchGetEvents reads the 10 000 events of one actor, and reports reads
// per second of the process's CPU time (reads/cpu-s).
func (rs recoveryStore) benchGetEvents(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		n := 0
		if err := rs.s.GetEvents(ctx, "router", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != recoveryEntries {
			b.Fatalf("read %d events, err %v", n, err)
		}
	}
	if cpu := processCPU() - cpu; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "reads/cpu-s")
	}
}

// benchBigSnapshot reads one snapshot of 10 000 entries.
func (rs recoveryStore) benchBigSnapshot(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if snap, ok, err := rs.s.GetSnapshot(ctx, "big"); err != nil || !ok || len(snap.Data) != eventSize*recoveryEntries {
			b.Fatalf("snapshot: %d bytes, %v, %v", len(snap.Data), ok, err)
		}
	}
}

// benchNamedSnapshots reads 10 000 snapshots, one per actor name.
func (rs recoveryStore) benchNamedSnapshots(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for i := range recoveryEntries {
			if _, ok, err := rs.s.GetSnapshot(ctx, fmt.Sprintf("call-%05d", i)); err != nil || !ok {
				b.Fatalf("snapshot %d: %v, %v", i, ok, err)
			}
		}
	}
}

// newRecoveryFile writes a filled bbolt file for benchReopen.
func newRecoveryFile(path string) error {
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	if err != nil {
		return err
	}
	if err := fillRecovery(s); err != nil {
		s.Close()
		return err
	}
	return s.Close()
}

// benchReopen is a restarting process: open the file, then read the
// snapshot and the 10 000 events of one actor.
func benchReopen(b *testing.B, path string) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := boltstore.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.GetSnapshot(ctx, "router"); err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := s.GetEvents(ctx, "router", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != recoveryEntries {
			b.Fatalf("read %d events, err %v", n, err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchProviderGetEvents decodes 10 000 Any-encoded events through the
// protoactor adapter.
func benchProviderGetEvents(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "provider.db"), &boltstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p, err := durability.NewProvider(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := wrapperspb.String(string(bytes.Repeat([]byte{'r'}, eventSize-40)))
	for i := range recoveryEntries {
		p.PersistEvent("router", i, msg)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		p.GetEvents("router", 0, 0, func(any) { n++ })
		if n != recoveryEntries {
			b.Fatalf("read %d events", n)
		}
	}
}

// noSyncBolt opens a bbolt store without fsync (for filling; reads are the
// same).
func noSyncBolt(path string) (durability.Store, error) {
	return boltstore.Open(path, &boltstore.Options{NoSync: true})
}

// noSyncBurst is how many events each of writers persists in a slice of
// the checksum rows without fsync: 128 with 64 writers, 8192 in all, as
// many as a store takes between checkpoints (DefaultCheckpointOps), so that every
// slice holds about one checkpoint's work (with 32, one slice in four
// held it, about 4 times a plain slice's CPU, and a few commits decided
// whether it fell at the end of a slice or at the start of the next).
func noSyncBurst(writers int) int {
	return max(1, boltstore.DefaultCheckpointOps/writers)
}

// storeRows are figure 4's store-level rows: what checksums cost (the same
// code with them off, in the same run), batched persists, compaction and
// how long a checkpoint makes writers wait.
func storeRows(c *config) []Row {
	writers := 64
	if c.smoke {
		writers = 2
	}
	// The interleaved rows run longer than one measurement of the others
	// (their two sides share the time, and fsync times vary commit to
	// commit): a round is one run of 3, 6 or 10 times -benchtime. Without
	// fsync a pair of slices (with its collections) took 0.13-0.15 s on 2
	// shared cores, so that 3 times the default 300 ms made a round of
	// some 6 pairs, 3 of them counted: in 7 runs of 5 rounds, the A/A
	// row's rounds spanned 0.06 to 0.53 (median 0.11, e.g. 0.95-1.06);
	// at 10 times, about 20 pairs, 0.05 to 0.09 (median 0.06). With
	// fsync too the rows count CPU time: a slice's wall time is mostly
	// the disk's, whose speed moves from commit to commit (over the same
	// pairs of an A/A run, 8 rounds on a busy machine, the wall ratios
	// ranged from 0.81 to 1.11, the CPU ratios from 0.94 to 1.02), over
	// 8 times -benchtime (6 before, 10 pairs more a round); the reads
	// over 4 (3 before).
	long, longer, longest := c.abTime(4), c.abTime(8), c.abTime(10)
	onOff, onOn := onOffNames, onOnNames
	// Each slice starts from a collected heap; a run's first pairs (a
	// fresh store: its buckets made, its file grown) are not counted.
	// Without fsync a slice is 128 events per writer, 8192 in all: a
	// store checkpoints every DefaultCheckpointOps (8192) writes, so each
	// slice holds one checkpoint's work, as the writes' cost does.
	fsync := pairRun{until: longer, warmup: 4, gc: true}
	noSync := pairRun{until: longest, warmup: 2, gc: true}
	reads := pairRun{until: long, warmup: 2, gc: true}
	noSyncAB := persistAB(writers, noSyncBurst(writers), &boltstore.Options{NoSync: true})
	fsyncAB := persistAB(writers, 8, nil)
	fsyncOn, fsyncOff := checksumSides(onOff, checksumsAB, true, fsync, fsyncAB)
	fsyncAA, fsyncAA2 := checksumSides(onOn, checksumsAA, true, fsync, fsyncAB)
	noSyncOn, noSyncOff := checksumSides(onOff, checksumsAB, true, noSync, noSyncAB)
	noSyncAA, noSyncAA2 := checksumSides(onOn, checksumsAA, true, noSync, noSyncAB)
	readOn, readOff := checksumSides(onOff, checksumsAB, false, reads, readAB)
	readCPUOn, readCPUOff := checksumSides(onOff, checksumsAB, true, reads, readAB)
	readAA, readAA2 := checksumSides(onOn, checksumsAA, false, reads, readAB)
	// How the rows below take a round's ratio (see durability_store_ab.go).
	const byPairs = byPairsNote
	return c.rows([]pair{
		{figure: "4", name: fmt.Sprintf("store: persist, bbolt, %d writers, checksums on vs off", writers),
			ours: fsyncOn, base: fsyncOff,
			kind: throughput, unit: "events per CPU", goal: ratioAtLeast(0.97),
			note: "events per second of the process's CPU time: one run per round, the sides interleaved: two stores (one with checksums, one without) written in turn, in pairs of turns whose order is drawn at random, 8 events per writer at a turn, so that the disk's speed drifting during the run falls on both; the process's CPU time of each turn (its wall time is mostly fsync's, which moves from commit to commit: over the same pairs of two sides doing the same work, the rounds' wall ratios spread several times as wide as their CPU ratios; what checksums add is CPU work, a larger share of the CPU time than of the wall time)" + byPairs},
		{figure: "4", name: fmt.Sprintf("store: persist, bbolt, %d writers, checksums on vs on (A/A)", writers),
			ours: fsyncAA, base: fsyncAA2,
			kind: throughput, unit: "events per CPU", goal: info,
			note: "the row above with checksums on both sides: the spread of the method itself (1.00× is exact)"},
		{figure: "4", name: fmt.Sprintf("store: persist, bbolt without fsync, %d writers, checksums on vs off, per CPU second", writers),
			ours: noSyncOn, base: noSyncOff,
			kind: throughput, unit: "events per CPU", goal: ratioAtLeast(0.97),
			note: "events per second of the process's CPU time, fsync left out: the work checksums add to a write (the writers' record checksums, the committer's log value checksum); measured as the row above, 128 events per writer at a turn (8192 writes, those of one checkpoint), the process's CPU time of each slice" + byPairs},
		{figure: "4", name: fmt.Sprintf("store: persist, bbolt without fsync, %d writers, checksums on vs on (A/A), per CPU second", writers),
			ours: noSyncAA, base: noSyncAA2,
			kind: throughput, unit: "events per CPU", goal: info,
			note: "the row above with checksums on both sides: what it measures of two sides that do the same work, the spread of the method itself (1.00× is exact)"},
		{figure: "4", name: "store: read 10 000 events, bbolt, checksums on vs off",
			ours: readOn, base: readOff,
			kind: duration, unit: "read", goal: ratioAtMost(1.03),
			note: "one run per round, the sides interleaved read by read: a file written with checksums, opened again, read whole with the checks and without them in turn, in pairs of reads whose order is drawn at random (the same bytes, the same pages, the same copies), wall time" + byPairs},
		{figure: "4", name: "store: read 10 000 events, bbolt, checksums on vs off, per CPU second",
			ours: readCPUOn, base: readCPUOff,
			kind: throughput, unit: "reads per CPU", goal: info,
			note: "reads per second of the process's CPU time, measured as the row above: the read row's cost, whatever share of a busy machine the process gets; the collections between slices are left out of both sides" + byPairs},
		{figure: "4", name: "store: read 10 000 events, bbolt, checksums on vs on (A/A)",
			ours: readAA, base: readAA2,
			kind: duration, unit: "read", goal: info,
			note: "the read row with the checks on both sides: the spread of the method itself (1.00× is exact)"},
		{figure: "4", name: fmt.Sprintf("store: persist batches of 8, bbolt, %d writers", writers),
			ours: metricSide("PersistEvents", "events/s", func(b *testing.B) { benchPersistBatch(b, writers, 8) }),
			base: metricSide("PersistEvent", "events/s", func(b *testing.B) { benchPersist(b, writers, openBolt(nil)) }),
			kind: throughput, unit: "events", goal: info},
		{figure: "4", name: "store: compaction with 90 % of sessions ended, file size after vs before",
			ours: compactionSide("after", true), base: compactionSide("before", false),
			kind: memory, unit: "KiB", goal: ratioAtMost(0.2)},
		{figure: "4", name: "store: longest write wait, checkpoint in steps vs in one transaction",
			ours: checkpointWaitSide("in steps", false, true), base: checkpointWaitSide("one transaction", true, true),
			kind: duration, unit: "write", goal: info,
			note: "16 writers, 16 000 writes, a checkpoint every 4096: the checkpoint moves the log into the actors' buckets a few steps per commit, inside the commits' own transactions; the baseline moves it in one commit, as before (the longest write was then 21.7x the median)"},
		{figure: "4", name: "store: most page writes in one commit, checkpoint in steps vs in one transaction",
			ours: commitWritesSide("in steps", false), base: commitWritesSide("one transaction", true),
			kind: memory, unit: "writes", goal: ratioAtMost(0.5),
			note: "what a writer queued behind the largest commit waits for, counted (bbolt's page writes), so that machine load does not blur it"},
		{figure: "4", name: "store: longest write wait around checkpoints vs median write",
			ours: checkpointWaitSide("longest", false, true), base: checkpointWaitSide("median", false, false),
			kind: duration, unit: "write", goal: info},
	})
}

// benchPersistBatch reports events/s for writers each persisting batches
// of per events with PersistEvents, waiting for each.
func benchPersistBatch(b *testing.B, writers, per int) {
	s := openBolt(nil)(b)
	defer s.Close()
	ctx := context.Background()
	batch := make([][]byte, per)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte{'c'}, eventSize)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("stream-%03d", w)
			for i := uint64(0); next.Add(1) <= int64(b.N); i += uint64(per) {
				if err := s.PersistEvents(ctx, name, i, batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "events/s")
}

// compactionSide measures the file size (KiB) of a store of 1000 sessions
// after 900 of them were deleted, before or after Compact.
func compactionSide(name string, compacted bool) side {
	return side{name: name, measure: func() sample {
		dir, err := os.MkdirTemp("", "polyweave-bench-compact-")
		if err != nil {
			return sample{err: err}
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "compact.db")
		s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
		if err != nil {
			return sample{err: err}
		}
		defer s.Close()
		ctx := context.Background()
		batch := make([][]byte, 20)
		for i := range batch {
			batch[i] = bytes.Repeat([]byte{'s'}, 4*eventSize)
		}
		for n := range 1000 {
			name := fmt.Sprintf("session-%04d", n)
			if err := s.PersistEvents(ctx, name, 0, batch); err != nil {
				return sample{err: err}
			}
			if err := s.PersistSnapshot(ctx, name, 10, batch[0]); err != nil {
				return sample{err: err}
			}
		}
		for n := 100; n < 1000; n++ {
			name := fmt.Sprintf("session-%04d", n)
			if err := s.DeleteEvents(ctx, name, math.MaxUint64); err != nil {
				return sample{err: err}
			}
			if err := s.DeleteSnapshots(ctx, name, math.MaxUint64); err != nil {
				return sample{err: err}
			}
		}
		st, err := s.Compact(ctx)
		if err != nil {
			return sample{err: err}
		}
		size := st.Before
		if compacted {
			size = st.After
		}
		return sample{ns: float64(size) / 1024}
	}}
}

// checkpointWaitSide runs 16 writers through 16 000 writes with a
// checkpoint every 4096 writes (in steps, or whole: in one commit) and
// measures the longest or the median time a write waited, in ns.
func checkpointWaitSide(name string, whole, longest bool) side {
	return side{name: name, measure: func() sample {
		waits, _, err := checkpointRun(whole)
		if err != nil {
			return sample{err: err}
		}
		if longest {
			return sample{ns: float64(waits[len(waits)-1])}
		}
		return sample{ns: float64(waits[len(waits)/2])}
	}}
}

// commitWritesSide runs the writes of checkpointWaitSide and reports the
// most page writes one commit made.
func commitWritesSide(name string, whole bool) side {
	return side{name: name, measure: func() sample {
		_, most, err := checkpointRun(whole)
		if err != nil {
			return sample{err: err}
		}
		return sample{ns: float64(most)}
	}}
}

// checkpointRun runs 16 writers through 16 000 writes of a fresh store
// with a checkpoint every 4096 writes, in steps or whole, and returns the
// waits, sorted, and the most page writes one of their commits made (not
// counting Open's and Close's).
func checkpointRun(whole bool) ([]time.Duration, int64, error) {
	benchhook.CheckpointWhole.Store(whole)
	defer benchhook.CheckpointWhole.Store(false)
	dir, err := os.MkdirTemp("", "polyweave-bench-checkpoint-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	s, err := boltstore.Open(filepath.Join(dir, "cp.db"), &boltstore.Options{CheckpointOps: 4096})
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	benchhook.MaxCommitWrites.Store(0)
	benchhook.TrackCommits.Store(true)
	const writers, each = 16, 1000
	waits := make([][]time.Duration, writers)
	data := bytes.Repeat([]byte{'w'}, eventSize)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range uint64(each) {
				start := time.Now()
				if err := s.PersistEvent(context.Background(), fmt.Sprint("w", w), i, data); err != nil {
					errs <- err
					return
				}
				waits[w] = append(waits[w], time.Since(start))
			}
		})
	}
	wg.Wait()
	benchhook.TrackCommits.Store(false)
	close(errs)
	if err := <-errs; err != nil {
		return nil, 0, err
	}
	all := slices.Concat(waits...)
	slices.Sort(all)
	return all, benchhook.MaxCommitWrites.Load(), nil
}
