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

// TestVerifyAndSalvage_StoppedLeaveNothingOpen: VerifyContext (of a
// file, and of a file a running store holds, whose copy it verifies)
// and SalvageFile stopped while checking the pages leave no descriptor
// open on the file, its copies or anything else in its folder or
// TMPDIR, and no file behind.
func TestVerifyAndSalvage_StoppedLeaveNothingOpen(t *testing.T) {
	path, _ := pagesFile(t, true)
	dir := filepath.Dir(path)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, c := range []struct {
		what string
		held bool
		run  func(ctx context.Context) error
	}{
		{"VerifyContext", false, func(ctx context.Context) error {
			_, err := VerifyContext(ctx, path, nil)
			return err
		}},
		{"VerifyContext of a held file", true, func(ctx context.Context) error {
			_, err := VerifyContext(ctx, path, &Options{OpenTimeout: time.Millisecond})
			return err
		}},
		{"SalvageFile", false, func(ctx context.Context) error {
			_, err := SalvageFile(ctx, path, filepath.Join(dir, "salvaged.db"), &Options{NoSync: true})
			return err
		}},
	} {
		var holder *Store
		if c.held {
			var err error
			if holder, err = Open(path, &Options{NoSync: true}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		pages := 0
		pageWalked = func() { pages++; cancel() }
		err := c.run(ctx)
		pageWalked = nil
		cancel()
		if holder != nil {
			holder.Close()
		}
		if pages != 1 {
			t.Errorf("%s: %d pages read after the context ended, want 1", c.what, pages)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s stopped while checking the pages: %v, want context.Canceled", c.what, err)
		}
		if fds := openUnder(t, dir, tmp); len(fds) > 0 {
			t.Errorf("%s stopped left descriptors open: %q", c.what, fds)
		}
		for _, d := range []string{dir, tmp} {
			if left, err := os.ReadDir(d); err != nil || len(left) != 0 && (d == tmp || len(left) != 1) {
				t.Errorf("%s stopped left in %s: %v %v", c.what, d, left, err)
			}
		}
	}
}

// openUnder returns the targets of this process's descriptors open on
// files in the folders dirs (removed files too).
func openUnder(t *testing.T, dirs ...string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		for _, d := range dirs {
			if abs, err := filepath.EvalSymlinks(d); err == nil && strings.HasPrefix(target, abs+"/") {
				open = append(open, target)
			}
		}
	}
	return open
}
