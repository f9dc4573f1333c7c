package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hooked is a store opened through open's file-opening hook, so that a
// test can make the opening of any of its files fail.
type hooked struct {
	*Store
	file *os.File // the store's descriptor, as opened
	// before, when set, runs before each file is opened, with its name:
	// an error fails the open. Set it only while no operation runs.
	before func(name string) error
}

// hookedStore opens the store at path (creating it if need be) through
// the hook of a new hooked; Close is left to the test.
func hookedStore(t *testing.T, path string, opts *Options) *hooked {
	t.Helper()
	h := &hooked{}
	s, err := open(t.Context(), path, opts, func(name string, flag int, mode os.FileMode) (*os.File, error) {
		if h.before != nil {
			if err := h.before(name); err != nil {
				return nil, err
			}
		}
		f, err := os.OpenFile(name, flag, mode)
		if err == nil && name == path {
			h.file = f
		}
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Store = s
	return h
}

// noCompactCopies fails t if a copy of Compact is left next to path.
func noCompactCopies(t *testing.T, path string) {
	t.Helper()
	if left, _ := filepath.Glob(path + ".compact-*"); len(left) > 0 {
		t.Errorf("Compact left %v behind", left)
	}
}

// readEvents returns actor name's events in s.
func readEvents(t *testing.T, s *Store, name string) string {
	t.Helper()
	var got []string
	if err := s.GetEvents(t.Context(), name, 0, 0, func(_ uint64, d []byte) error { got = append(got, string(d)); return nil }); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(got)
}

// TestCompact_CanceledBeforeTheSwitch_CheckpointsGoOn: Compact holds the
// checkpoints back while it copies the buckets. When its context is
// canceled before the last step (here as the copy is opened), Compact
// fails with the context's error, removes the copy, and the checkpoints go
// on: they are not held back for good, the log growing in memory.
func TestCompact_CanceledBeforeTheSwitch_CheckpointsGoOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	h := hookedStore(t, path, &Options{NoSync: true})
	defer h.Close()
	if err := h.PersistEvent(t.Context(), "a", 0, []byte("before")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h.before = func(name string) error {
		if strings.HasPrefix(name, path+".compact-") {
			cancel()
		}
		return nil
	}
	if _, err := h.Compact(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Compact canceled during the copy: %v, want context.Canceled", err)
	}
	h.before = nil
	noCompactCopies(t, path)
	var held bool
	if err := h.inCommitter(t.Context(), func() error { held = h.compacting; return nil }); err != nil {
		t.Fatal(err)
	}
	if held {
		t.Error("after a canceled Compact, checkpoints are held back for good")
	}
	if err := h.PersistEvent(t.Context(), "a", 1, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Compact(t.Context()); err != nil {
		t.Fatalf("Compact again: %v", err)
	}
	if got := readEvents(t, h.Store, "a"); got != "[before after]" {
		t.Errorf("the store holds %v, want [before after]", got)
	}
}

// TestCompact_SalvageWaits runs Salvage while Compact copies the buckets,
// with a write in the log made after Compact's checkpoint: Salvage
// checkpoints, moving it into the buckets and out of the log, after the
// copy was taken of the buckets and before the log is copied at the
// switch, so the compacted file would lose it. Salvage waits for Compact
// instead: every write is kept.
func TestCompact_SalvageWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	h := hookedStore(t, path, &Options{NoSync: true, CheckpointOps: 1 << 20})
	defer h.Close()
	for _, name := range []string{"a", "b"} {
		if err := h.PersistEvent(t.Context(), name, 0, []byte(name+"0")); err != nil {
			t.Fatal(err)
		}
	}
	h.before = func(name string) error {
		if strings.HasPrefix(name, path+".compact-") { // Compact has checkpointed
			return h.PersistEvent(context.Background(), "a", 1, []byte("a1"))
		}
		return nil
	}
	salvaged := make(chan error, 1)
	waits := make(chan struct{}, 1)
	signal := func() {
		select {
		case waits <- struct{}{}:
		default:
		}
	}
	compactCopying = func() {
		compactCopying = nil
		salvageLocking, checkpointed = signal, signal
		go func() {
			_, err := h.Salvage(context.Background(), "b")
			salvaged <- err
		}()
		<-waits // Salvage waits for Compact, or (the defect) has checkpointed
	}
	defer func() { compactCopying, salvageLocking, checkpointed = nil, nil, nil }()
	if _, err := h.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.before = nil
	if err := <-salvaged; err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := readEvents(t, s, "a"); got != "[a0 a1]" {
		t.Errorf("after Compact with a Salvage during its copy, actor a holds %v, want [a0 a1]", got)
	}
}

// TestCompact_SalvageWaitStopsWithItsContext: a Salvage waiting for a
// Compact under way stops when its own context ends, with an error
// wrapping the context's, and does nothing; the Compact goes on. (Were
// the wait deaf to the context, Salvage would wait for Compact, which
// waits here for Salvage: the test would hang.)
func TestCompact_SalvageWaitStopsWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	h := hookedStore(t, path, &Options{NoSync: true})
	defer h.Close()
	if err := h.PersistEvent(t.Context(), "b", 0, []byte("b0")); err != nil {
		t.Fatal(err)
	}
	var salvageErr error
	compactCopying = func() {
		compactCopying = nil
		ctx, cancel := context.WithCancel(context.Background())
		salvageLocking = cancel // Salvage is about to wait for Compact: stop it
		salvaged := make(chan error)
		go func() {
			_, err := h.Salvage(ctx, "b")
			salvaged <- err
		}()
		salvageErr = <-salvaged
	}
	defer func() { compactCopying, salvageLocking = nil, nil }()
	if _, err := h.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(salvageErr, context.Canceled) {
		t.Errorf("Salvage stopped while it waits for Compact: %v, want context.Canceled", salvageErr)
	}
	if got := readEvents(t, h.Store, "b"); got != "[b0]" {
		t.Errorf("actor b holds %v, want [b0]", got)
	}
}
