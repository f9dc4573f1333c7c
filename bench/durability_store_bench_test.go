package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/boltstore"
	"github.com/polyweave/polyweave-go/durability/memstore"
)

// eventSize is the size of one persisted event, about one argument chunk
// with its framing.
const eventSize = 100

// recoveryEntries is how many pending entries the recovery benchmarks read.
const recoveryEntries = 10_000

// BenchmarkDiskFsync measures the disk's floor for durable writes: one 4 KiB
// overwrite plus fdatasync per op, in the directory the bbolt benchmarks
// use. A bbolt commit needs two of these (data pages, then the meta page).
func BenchmarkDiskFsync(b *testing.B) {
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

// BenchmarkPersistEvent reports events/s for ~100-byte events: writers each
// persist to their own actor name, one event at a time, waiting for each
// (as a persistent actor does).
func BenchmarkPersistEvent(b *testing.B) {
	openBolt := func(opts *boltstore.Options) func(b *testing.B) durability.Store {
		return func(b *testing.B) durability.Store {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), opts)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	}
	memory := func(*testing.B) durability.Store { return memstore.New(nil) }
	for _, c := range []struct {
		name    string
		writers int
		open    func(b *testing.B) durability.Store
	}{
		{"memstore/writers=1", 1, memory},
		{"memstore/writers=64", 64, memory},
		{"bolt/writers=1", 1, openBolt(nil)},
		{"bolt/writers=64", 64, openBolt(nil)},
		{"bolt/writers=256", 256, openBolt(nil)},
		{"bolt-delay200µs/writers=64", 64, openBolt(&boltstore.Options{MaxBatchDelay: 200 * time.Microsecond})},
		{"bolt-nosync/writers=64", 64, openBolt(&boltstore.Options{NoSync: true})},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := c.open(b)
			defer s.Close()
			persistConcurrently(b, c.writers, func(ctx context.Context, name string, i uint64, data []byte) error {
				return s.PersistEvent(ctx, name, i, data)
			})
		})
	}
	// Baseline: bbolt's own group commit (db.Batch) with its defaults, one
	// bucket per writer, the same workload.
	b.Run("bbolt-Batch-defaults/writers=64", func(b *testing.B) {
		db, err := bolt.Open(filepath.Join(b.TempDir(), "batch.db"), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		persistConcurrently(b, 64, func(_ context.Context, name string, i uint64, data []byte) error {
			return db.Batch(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte(name))
				if err != nil {
					return err
				}
				return bk.Put(fmt.Appendf(nil, "%016x", i), data)
			})
		})
	})
	// Through the protoactor adapter (Any encoding, panics on failure).
	b.Run("provider-bolt/writers=64", func(b *testing.B) {
		s := openBolt(nil)(b)
		defer s.Close()
		p, err := durability.NewProvider(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		msg := wrapperspb.String(string(bytes.Repeat([]byte{'x'}, eventSize-40)))
		persistConcurrently(b, 64, func(_ context.Context, name string, i uint64, _ []byte) error {
			p.PersistEvent(name, int(i), msg)
			return nil
		})
	})
}

// persistConcurrently runs b.N persist calls spread over writers
// goroutines, each with its own actor name and increasing indexes, and
// reports events/s.
func persistConcurrently(b *testing.B, writers int, persist func(ctx context.Context, name string, i uint64, data []byte) error) {
	b.Helper()
	ctx := context.Background()
	data := bytes.Repeat([]byte{'c'}, eventSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
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
}

// BenchmarkRecover reports the time to read back recoveryEntries pending
// entries: GetEvents over one actor's 10 000 events (raw, and decoded to
// messages through the provider), GetSnapshot of a 10 000-entry state, and
// GetSnapshot across 10 000 actor names.
func BenchmarkRecover(b *testing.B) {
	ctx := context.Background()
	data := bytes.Repeat([]byte{'r'}, eventSize)
	fill := func(b *testing.B, s durability.Store) {
		b.Helper()
		var wg sync.WaitGroup
		const writers = 64
		for w := range writers {
			wg.Go(func() {
				for i := w; i < recoveryEntries; i += writers {
					if err := s.PersistEvent(ctx, "router", uint64(i), data); err != nil {
						b.Error(err)
					}
					if err := s.PersistSnapshot(ctx, fmt.Sprintf("call-%05d", i), 0, data); err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
		big := bytes.Repeat(data, recoveryEntries)
		if err := s.PersistSnapshot(ctx, "big", 0, big); err != nil {
			b.Fatal(err)
		}
	}
	stores := []struct {
		name string
		open func(b *testing.B) durability.Store
	}{
		{"memstore", func(*testing.B) durability.Store { return memstore.New(nil) }},
		{"bolt", func(b *testing.B) durability.Store {
			// NoSync only speeds up filling; reads are the same.
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "recover.db"), &boltstore.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		s := st.open(b)
		fill(b, s)
		b.Run(st.name+"/GetEvents", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := s.GetEvents(ctx, "router", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != recoveryEntries {
					b.Fatalf("read %d events, err %v", n, err)
				}
			}
		})
		b.Run(st.name+"/GetSnapshot-10000-entries", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if snap, ok, err := s.GetSnapshot(ctx, "big"); err != nil || !ok || len(snap.Data) != eventSize*recoveryEntries {
					b.Fatalf("snapshot: %d bytes, %v, %v", len(snap.Data), ok, err)
				}
			}
		})
		b.Run(st.name+"/GetSnapshot-10000-names", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := range recoveryEntries {
					if _, ok, err := s.GetSnapshot(ctx, fmt.Sprintf("call-%05d", i)); err != nil || !ok {
						b.Fatalf("snapshot %d: %v, %v", i, ok, err)
					}
				}
			}
		})
		s.Close()
	}

	// A restarting process: open the file, then read the snapshot and the
	// 10 000 events of one actor.
	b.Run("bolt/Open+GetSnapshot+GetEvents", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "reopen.db")
		s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		fill(b, s)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
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
	})

	// Through the provider: decode 10 000 Any-encoded events.
	b.Run("provider-bolt/GetEvents", func(b *testing.B) {
		s := stores[1].open(b)
		defer s.Close()
		p, err := durability.NewProvider(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		msg := wrapperspb.String(string(data[:eventSize-40]))
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
	})
}
