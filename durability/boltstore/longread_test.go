package boltstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestGetEvents_LongReadWhileCheckpointing: a read of more events than
// one transaction of GetEvents reads, while the actor's own writes are
// checkpointed into its bucket between its pages (events appended, and
// events written again at indexes the read has passed or not yet
// reached), never reports damage: a walk over pages is compared with the
// summary only while every page finds the same one. Every event it
// returns is one written at its index, and it returns every index below
// those written before it started.
func TestGetEvents_LongReadWhileCheckpointing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.db")
	s, err := Open(path, &Options{NoSync: true, CheckpointOps: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := func(i uint64, round int) []byte { return fmt.Appendf(nil, "event %d round %d", i, round) }
	const n = 3000
	batch := make([][]byte, n)
	for i := range batch {
		batch[i] = value(uint64(i), 0)
	}
	if err := s.PersistEvents(t.Context(), "long", 0, batch); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the writer: one event appended, one written again, in turn
		defer wg.Done()
		next := uint64(n)
		for round := 1; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			i, data := next, value(next, 0)
			if round%2 == 0 {
				i = uint64(round*37) % n
				data = value(i, round)
			} else {
				next++
			}
			if err := s.PersistEvent(t.Context(), "long", i, data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 20 {
		got := 0
		err := s.GetEvents(t.Context(), "long", 0, 0, func(i uint64, d []byte) error {
			if uint64(got) != i || !bytes.HasPrefix(d, fmt.Appendf(nil, "event %d round ", i)) {
				return fmt.Errorf("event %d read as %q where %d was due", i, d, got)
			}
			got++
			return nil
		})
		if err != nil || got < n {
			t.Errorf("a read of every event while they are checkpointed: %d read, %v", got, err)
			break
		}
	}
	close(stop)
	wg.Wait()
}
