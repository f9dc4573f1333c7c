package boltstore

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// BenchmarkPersistEvent_Concurrent reports events per second persisted by
// writers goroutines at once, each its own actor, as the streaming router
// does with one persist in flight per stream. The nosync cases leave out
// fsync, to show the store's own work per commit (the committer's and the
// writers' CPU), which a loaded disk otherwise hides.
func BenchmarkPersistEvent_Concurrent(b *testing.B) {
	for _, c := range []struct {
		writers int
		noSync  bool
	}{{1, false}, {64, false}, {64, true}} {
		writers := c.writers
		name := fmt.Sprintf("writers=%d", writers)
		if c.noSync {
			name += "/nosync"
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "bench.db"), &Options{NoSync: c.noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, 64) // about one encoded argument chunk
			perWriter := max(1, (b.N+writers-1)/writers)
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					name := fmt.Sprintf("router-%d", w)
					for i := range perWriter {
						if err := s.PersistEvent(ctx, name, uint64(i), data); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(perWriter*writers)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(perWriter*writers)/float64(s.nextSeq), "writes/commit")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(s.nextSeq), "µs/commit")
		})
	}
}

// BenchmarkGetEvents_10k reads back 10 000 checkpointed events of about
// 100 bytes of one actor, as a recovering router does, with checksums on
// and off (the file written and read that way), for an A/B of what they
// cost: go test -run '^$' -bench GetEvents_10k -count 10 | benchstat -col /checksums
func BenchmarkGetEvents_10k(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprint("checksums=", on), func(b *testing.B) {
			benchhook.ChecksumsOff.Store(!on)
			defer benchhook.ChecksumsOff.Store(false)
			s := openReadFixture(b)
			b.ReportAllocs()
			for b.Loop() {
				readFixture(b, s)
			}
		})
	}
}

// fixtureEvents is how many events openReadFixture writes.
const fixtureEvents = 10_000

// openReadFixture writes fixtureEvents events of 100 bytes of actor
// "router" to a new store, in batches of 1000, with checksums as the
// switch has them, and opens it again, so that reads take them from the
// actor's bucket (Open checkpoints the log). The store is closed when b
// ends.
func openReadFixture(b *testing.B) *Store {
	b.Helper()
	path := filepath.Join(b.TempDir(), "reads.db")
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = make([]byte, 100)
	}
	for i := 0; i < fixtureEvents; i += len(batch) {
		if err := s.PersistEvents(b.Context(), "router", uint64(i), batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// readFixture reads all of openReadFixture's events back.
func readFixture(b *testing.B, s *Store) {
	n := 0
	if err := s.GetEvents(b.Context(), "router", 0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != fixtureEvents {
		b.Fatalf("%d events, %v", n, err)
	}
}
