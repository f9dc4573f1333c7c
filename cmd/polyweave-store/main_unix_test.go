//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestVerify_FIFO gives a FIFO as the store: verify says it is not a
// regular file, exit 2, instead of waiting forever in open(2) for a
// writer.
func TestVerify_FIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := verify(t, "-timeout", "100ms", path)
	if code != 2 || !strings.Contains(out, "FIFO (named pipe), not a regular file") {
		t.Errorf("exit %d, want 2 and \"not a regular file\":\n%s", code, out)
	}
}
