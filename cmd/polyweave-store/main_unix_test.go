//go:build unix

package main

import (
	"context"
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

// TestStopSignals sends this process each signal that asks a command to
// stop (Ctrl-C, kill's and timeout's SIGTERM, a closed terminal's
// SIGHUP): each ends the command's context, so that it stops and removes
// what it wrote (salvage's copies next to NEWFILE) instead of dying with
// them left behind.
func TestStopSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		ctx, stop := stopContext()
		if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		<-ctx.Done()
		stop()
		t.Logf("%v: %v", sig, context.Cause(ctx))
	}
}
