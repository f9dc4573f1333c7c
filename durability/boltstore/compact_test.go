package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCompact_EndedSessionsReclaimSpace writes 100 sessions, deletes 90 of
// them and compacts while writers keep writing: the file shrinks by at
// least 80 %, the kept sessions and every acknowledged write are there,
// after a reopen too, and the file verifies intact.
func TestCompact_EndedSessionsReclaimSpace(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789"), 100)
	for n := range 100 {
		name := fmt.Sprintf("session-%03d", n)
		batch := make([][]byte, 40)
		for i := range batch {
			batch[i] = payload
		}
		if err := s.PersistEvents(ctx, name, 0, batch); err != nil {
			t.Fatal(err)
		}
		if err := s.PersistSnapshot(ctx, name, 20, payload); err != nil {
			t.Fatal(err)
		}
	}
	for n := 10; n < 100; n++ { // the ended sessions
		name := fmt.Sprintf("session-%03d", n)
		if err := s.DeleteEvents(ctx, name, math.MaxUint64); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSnapshots(ctx, name, math.MaxUint64); err != nil {
			t.Fatal(err)
		}
	}

	// Writers keep going during the compaction.
	var acked [4]atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range acked {
		wg.Go(func() {
			for i := uint64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.PersistEvent(context.Background(), fmt.Sprint("writer-", w), i, []byte("during")); err != nil {
					t.Errorf("write during Compact: %v", err)
					return
				}
				acked[w].Store(i + 1)
			}
		})
	}
	st, err := s.Compact(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted %d → %d bytes (%.0f %% smaller); writes waited %v", st.Before, st.After, 100*(1-float64(st.After)/float64(st.Before)), st.Blocked)
	if st.After > st.Before/5 {
		t.Errorf("file %d → %d bytes after deleting 90 %% of the sessions, want at least 80 %% smaller", st.Before, st.After)
	}
	check := func(s *Store) {
		t.Helper()
		for n := range 100 {
			name := fmt.Sprintf("session-%03d", n)
			count := 0
			if err := s.GetEvents(ctx, name, 0, 0, func(_ uint64, d []byte) error {
				if !bytes.Equal(d, payload) {
					return fmt.Errorf("different data")
				}
				count++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := 20
			if n >= 10 {
				want = 0
			}
			if count != want {
				t.Errorf("%s: %d events, want %d", name, count, want)
			}
		}
		for w := range acked {
			count := uint64(0)
			if err := s.GetEvents(ctx, fmt.Sprint("writer-", w), 0, 0, func(uint64, []byte) error { count++; return nil }); err != nil {
				t.Fatal(err)
			}
			if count < acked[w].Load() {
				t.Errorf("writer %d: %d events, %d acknowledged", w, count, acked[w].Load())
			}
		}
	}
	check(s)
	if err := s.PersistEvent(ctx, "after", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := Verify(path, nil); err != nil || !r.Intact() {
		t.Fatalf("Verify after Compact: %v %+v", err, r)
	}
	s, err = Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCompact_ContextEndsWhileCopying ends Compact's context once it
// copies the buckets: it stops at the end of the transaction of the copy
// under way (a big file's copy would otherwise run to its end, past a
// deadline or an interrupt), removes the copy and leaves the store as it
// was.
func TestCompact_ContextEndsWhileCopying(t *testing.T) {
	path, want := pagesFile(t, false)
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func(n int64) { compactTxSize, compactCopying, compactCommitted = n, nil, nil }(compactTxSize)
	compactTxSize = 4096 // many transactions
	ctx, cancel := context.WithCancel(t.Context())
	compactCopying = cancel
	commits := 0
	compactCommitted = func() { commits++ }
	if _, err := s.Compact(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Compact whose context ended while it copied: %v, want context.Canceled", err)
	}
	if commits > 0 {
		t.Errorf("the copy went on for %d transactions after its context ended", commits)
	}
	if failed := checkPages(t, s, want, "after the stopped Compact"); len(failed) > 0 {
		t.Errorf("after the stopped Compact: %q fail", failed)
	}
	if left, err := os.ReadDir(filepath.Dir(path)); err != nil || len(left) != 1 {
		t.Errorf("next to the store: %v %v, want the store alone", left, err)
	}
}
