//go:build unix

package boltstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestOverlay_NotTheMappedFile damages, in the file, the log values
// that hold events not yet checkpointed, while a store serves them from
// its overlay: written by this store, and replayed by a read-only store
// from a log left by a crash. Reads return the events as written: the
// overlay holds the store's own copies (checked when replayed), never
// bytes of the mapped file, which is why reads do not check them again.
func TestOverlay_NotTheMappedFile(t *testing.T) {
	const n = 20
	event := func(i int) []byte {
		return fmt.Appendf(nil, "overlay event %02d %s", i, bytes.Repeat([]byte{'o'}, 100))
	}
	// written opens a store at path and writes the n events, which stay
	// in its log (and its overlay).
	written := func(path string) *Store {
		s, err := Open(path, &Options{NoSync: true, CheckpointOps: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := s.PersistEvent(t.Context(), "a", uint64(i), event(i)); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	check := func(s *Store, what string) {
		t.Helper()
		got := 0
		err := s.GetEvents(t.Context(), "a", 0, 0, func(i uint64, d []byte) error {
			if !bytes.Equal(d, event(int(i))) {
				t.Errorf("%s: event %d reads %q", what, i, d)
			}
			got++
			return nil
		})
		if err != nil || got != n {
			t.Errorf("%s: %d events, %v; want %d", what, got, err, n)
		}
	}
	path := filepath.Join(t.TempDir(), "store.db")
	s := written(path)
	damage(t, path, n, event)
	check(s, "written by the store")
	crash(t, s)

	// A log left by a crash, replayed by a read-only store, which keeps
	// it in its overlay.
	path = filepath.Join(t.TempDir(), "crashed.db")
	crash(t, written(path))
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.overlay.ops != n {
		t.Fatalf("the read-only store replayed %d writes, want %d", ro.overlay.ops, n)
	}
	damage(t, path, n, event)
	check(ro, "replayed by a read-only store")
}

// damage overwrites, in the file at path, the first byte of every copy
// of the n events.
func damage(t *testing.T, path string, n int, event func(int) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	found := 0
	for i := range n {
		for off := 0; ; {
			at := bytes.Index(b[off:], event(i))
			if at < 0 {
				break
			}
			if _, err := f.WriteAt([]byte{'X'}, int64(off+at)); err != nil {
				t.Fatal(err)
			}
			found++
			off += at + 1
		}
	}
	if found < n {
		t.Fatalf("found %d copies of %d events in the file", found, n)
	}
}
