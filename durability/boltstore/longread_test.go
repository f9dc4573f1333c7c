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

// TestGetEvents_LongReadDeletedBetweenPages: events deleted while a read
// of more events than one transaction reads is between its pages, and
// not yet checkpointed, hide the bucket's entries the next page would
// have walked; the walk over pages then covers less than the bucket its
// summary counts, which is no damage. The read goes on after the
// deleted events.
func TestGetEvents_LongReadDeletedBetweenPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete func(s *Store) error
	}{
		{"DeleteEvents", func(s *Store) error { return s.DeleteEvents(t.Context(), "long", 1999) }},
		{"PersistSnapshot", func(s *Store) error { return s.PersistSnapshot(t.Context(), "long", 2000, []byte("state")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "long.db")
			s, err := Open(path, &Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			const n = 3000
			batch := make([][]byte, n)
			for i := range batch {
				batch[i] = fmt.Appendf(nil, "event %d", i)
			}
			if err := s.PersistEvents(t.Context(), "long", 0, batch); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil { // checkpoints the events into the bucket
				t.Fatal(err)
			}
			if s, err = Open(path, &Options{NoSync: true}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []uint64
			err = s.GetEvents(t.Context(), "long", 0, 0, func(i uint64, _ []byte) error {
				if i == 0 {
					if err := tc.delete(s); err != nil {
						return err
					}
				}
				got = append(got, i)
				return nil
			})
			if err != nil {
				t.Fatalf("a read whose later pages the delete hides in part: %v", err)
			}
			if len(got) != readPageEvents+n-2000 || got[readPageEvents-1] != readPageEvents-1 || got[readPageEvents] != 2000 || got[len(got)-1] != n-1 {
				t.Errorf("read %d events (%v ... %v), want 0 to %d then 2000 to %d", len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], readPageEvents-1, n-1)
			}
		})
	}
}
