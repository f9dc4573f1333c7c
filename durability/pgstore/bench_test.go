package pgstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/polyweave/polyweave-go/durability/pgstore"
	"github.com/polyweave/polyweave-go/durability/pgstore/pgtest"
)

// BenchmarkPersistEvent_Concurrent reports events per second persisted by
// 64 writers at once, each its own actor and one write in flight, against
// a server of its own with fsync on (as the figure 8 rows run it), and how
// many writes shared a transaction.
func BenchmarkPersistEvent_Concurrent(b *testing.B) {
	srv, err := pgtest.Start(&pgtest.Options{Fsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	s, err := pgstore.Open(b.Context(), srv.DSN, &pgstore.Options{Schema: freshSchema()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const writers = 64
	data := make([]byte, 100)
	perWriter := max(1, (b.N+writers-1)/writers)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if err := s.PersistEvent(b.Context(), fmt.Sprint("router-", w), uint64(i), data); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(perWriter*writers)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(st.Writes)/float64(st.Commits), "writes/commit")
}
