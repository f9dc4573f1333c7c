package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// TestOpenContext_StopsTheWalk ends the context of an OpenContext once
// the check of the file's pages has read one: Open stops at the next
// page with a StoreError wrapping context.Canceled, and the file opens
// whole afterwards. VerifyContext stops there too.
func TestOpenContext_StopsTheWalk(t *testing.T) {
	path, want := pagesFile(t, true)
	for _, c := range []struct {
		what, doing string
		open        func(ctx context.Context) error
	}{
		{"OpenContext", "checking the pages", func(ctx context.Context) error {
			s, err := OpenContext(ctx, path, &Options{NoSync: true})
			if err == nil {
				s.Close()
				return nil
			}
			if se := (*durability.StoreError)(nil); !errors.As(err, &se) || se.Op != durability.OpOpen {
				t.Errorf("OpenContext stopped: %v, want a StoreError of Open", err)
			}
			return err
		}},
		{"VerifyContext", "verifying", func(ctx context.Context) error {
			r, err := VerifyContext(ctx, path, nil)
			if err == nil && r != nil && r.Unreadable != nil {
				t.Errorf("VerifyContext stopped: report unreadable %v, want an error", r.Unreadable)
			}
			return err
		}},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		pages := 0
		pageWalked = func() { pages++; cancel() }
		err := c.open(ctx)
		pageWalked = nil
		cancel()
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), c.doing) {
			t.Errorf("%s ended while checking the pages: %v, want context.Canceled, naming %q", c.what, err, c.doing)
		}
		if pages != 1 {
			t.Errorf("%s: %d pages read after the context ended, want 1", c.what, pages)
		}
	}
	openIntact(t, path, want, "after the stopped opens")
}

// openIntact opens the store file at path and checks that every actor
// reads back what want holds.
func openIntact(t *testing.T, path string, want map[string]*pagesActor, what string) {
	t.Helper()
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, what); len(failed) > 0 {
		t.Errorf("%s: actors failing: %q", what, failed)
	}
}

// TestOpenContext_StopsTheReplay ends the context of an OpenContext of a
// file left with writes in its log once the replay has read one entry:
// Open stops at the next with a StoreError wrapping context.Canceled,
// and a later Open replays the whole log.
func TestOpenContext_StopsTheReplay(t *testing.T) {
	path, want := pagesFile(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	entries := 0
	entryReplayed = func() { entries++; cancel() }
	s, err := OpenContext(ctx, path, &Options{NoSync: true})
	entryReplayed = nil
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "replaying the log") {
		t.Errorf("OpenContext ended while replaying: %v, want context.Canceled, naming the replay", err)
	}
	if entries != 1 {
		t.Errorf("%d log entries read after the context ended, want 1", entries)
	}
	openIntact(t, path, want, "after the stopped open")
}

// TestOpenContext_StoppedSaysWhy: a context ended with a cause (a
// signal's, as signal.NotifyContext gives) stops OpenContext,
// VerifyContext and SalvageFile with an error that says the cause and
// still wraps ctx.Err(), as their documentation says.
func TestOpenContext_StoppedSaysWhy(t *testing.T) {
	path, _ := pagesFile(t, true)
	why := errors.New("interrupt signal received")
	for _, c := range []struct {
		what string
		run  func(ctx context.Context) error
	}{
		{"OpenContext", func(ctx context.Context) error {
			s, err := OpenContext(ctx, path, &Options{NoSync: true})
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"VerifyContext", func(ctx context.Context) error {
			_, err := VerifyContext(ctx, path, nil)
			return err
		}},
		{"SalvageFile", func(ctx context.Context) error {
			_, err := SalvageFile(ctx, path, filepath.Join(t.TempDir(), "salvaged.db"), &Options{NoSync: true})
			return err
		}},
	} {
		ctx, cancel := context.WithCancelCause(t.Context())
		pageWalked = func() { cancel(why) }
		err := c.run(ctx)
		pageWalked = nil
		cancel(nil)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, why) || !strings.Contains(err.Error(), why.Error()) {
			t.Errorf("%s stopped with a cause: %v, want an error wrapping context.Canceled and the cause", c.what, err)
		}
	}
}
