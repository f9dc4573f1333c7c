package boltstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestVerifyContext_StopsTheCopy ends the context of a Verify of a held
// file while the copy is taken (the file is several chunks long): Verify
// stops there, with an error wrapping the context's, and the copy is
// gone from the temporary folder.
func TestVerifyContext_StopsTheCopy(t *testing.T) {
	path, _ := pagesFile(t, false)
	if fi, err := os.Stat(path); err != nil || fi.Size() <= copyChunk {
		// The copy must take more than one chunk: grow the store.
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(40) {
			if err := s.PersistEvent(t.Context(), "grow", i, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chunks := 0
	copiedChunk = func() { chunks++; cancel() }
	defer func() { copiedChunk = nil }()
	r, err := VerifyContext(ctx, path, &Options{OpenTimeout: 1})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "copying") || r != nil {
		t.Fatalf("VerifyContext ended while copying: %v %+v, want context.Canceled while copying", err, r)
	}
	if chunks != 1 {
		t.Errorf("%d chunks copied after the context ended, want 1", chunks)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("left in the temporary folder: %v %v", left, err)
	}
}
