package boltstore

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// BenchmarkPersistEvent_Concurrent reports events per second persisted by
// writers goroutines at once, each its own actor, as the streaming router
// does with one persist in flight per stream.
func BenchmarkPersistEvent_Concurrent(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
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
