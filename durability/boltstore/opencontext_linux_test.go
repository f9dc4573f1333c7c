package boltstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenContext_LeavesNothingOpen: an OpenContext stopped while it
// waits for the lock, checks the pages or replays the log leaves no
// descriptor of the file open (/proc/self/fd) and no lock on it: a
// later Open of the file takes it at once and reads every actor.
func TestOpenContext_LeavesNothingOpen(t *testing.T) {
	for _, stop := range []struct {
		where string
		hook  *func()
	}{
		{"waiting for the lock", &lockRetried},
		{"checking the pages", &pageWalked},
		{"replaying the log", &entryReplayed},
	} {
		path, want := pagesFile(t, true) // its writes in the log, not checkpointed
		var holder *Store
		if stop.hook == &lockRetried {
			h, err := Open(path, &Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			holder = h
		}
		ctx, cancel := context.WithCancel(t.Context())
		*stop.hook = cancel
		s, err := OpenContext(ctx, path, &Options{NoSync: true, OpenTimeout: time.Hour})
		*stop.hook = nil
		cancel()
		if err == nil {
			s.Close()
		}
		if holder != nil {
			holder.Close()
		}
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), stop.where) {
			t.Errorf("OpenContext stopped %s: %v, want context.Canceled, saying so", stop.where, err)
		}
		if fds := openOn(t, path); len(fds) > 0 {
			t.Errorf("OpenContext stopped %s left descriptors %q open on the file", stop.where, fds)
		}
		s, err = Open(path, &Options{NoSync: true, OpenTimeout: time.Nanosecond})
		if err != nil {
			t.Fatalf("Open after an OpenContext stopped %s: %v", stop.where, err)
		}
		failed := checkPages(t, s, want, "after an OpenContext stopped "+stop.where)
		s.Close()
		if len(failed) > 0 {
			t.Errorf("after an OpenContext stopped %s: actors failing: %q", stop.where, failed)
		}
	}
}

// openOn returns the descriptors of this process open on path.
func openOn(t *testing.T, path string) []string {
	t.Helper()
	abs, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == abs {
			fds = append(fds, e.Name())
		}
	}
	return fds
}
