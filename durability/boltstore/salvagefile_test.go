package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/durability"
)

// TestSalvageFile_EveryPageZeroed zeroes each page of a store with a log
// left by a crash in turn and salvages it into a new file: SalvageFile
// succeeds whenever a writable Open of the damaged file does (and also
// when that Open refuses a file only for its freelist), leaves the file
// unchanged and, when it fails, nothing at the new file; the new file
// verifies intact, every actor not salvaged reads back exactly what was
// written, and each salvaged one what SalvageFile says was kept.
func TestSalvageFile_EveryPageZeroed(t *testing.T) {
	t.Parallel()
	src, orig := pagesFile(t, true)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := memDir(t)
	path := filepath.Join(dir, "zeroed.db")
	step := campaignSeeds(t, len(b)/4096)
	salvaged, refused := 0, 0
	for p := 0; p < len(b)/4096; p += step {
		what := fmt.Sprintf("page %d of %d", p, len(b)/4096)
		zeroPage(t, path, b, p)
		damaged, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, openErr := Open(path, &Options{ReadOnly: true})
		if openErr == nil {
			s.Close()
		}
		dst := filepath.Join(dir, fmt.Sprintf("salvaged-%d.db", p))
		fs, err := SalvageFile(t.Context(), path, dst, &Options{NoSync: true})
		if after, rerr := os.ReadFile(path); rerr != nil || !bytes.Equal(after, damaged) {
			t.Fatalf("%s: SalvageFile changed the file (%v)", what, rerr)
		}
		if err != nil {
			refused++
			t.Logf("%s: refused: %v", what, err)
			if openErr == nil {
				t.Errorf("%s: SalvageFile: %v, though a read-only Open takes the file", what, err)
			}
			if _, serr := os.Lstat(dst); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s: a failed SalvageFile left %s (%v)", what, dst, serr)
			}
			continue
		}
		salvaged++
		if !fs.After.Intact() || fs.After.Format != formatVersion {
			t.Errorf("%s: the new file: %+v, want intact, of format %q", what, fs.After, formatVersion)
		}
		want := map[string]*pagesActor{}
		for name, a := range orig {
			want[name] = &pagesActor{events: maps.Clone(a.events), snapshot: a.snapshot}
		}
		for _, a := range fs.Actors {
			w := want[a.Name]
			kept := map[uint64][]byte{}
			for i := a.Kept.From; i < a.Kept.From+uint64(a.Kept.Events); i++ {
				kept[i] = w.events[i]
			}
			w.events = kept
			if !a.Kept.Snapshot {
				w.snapshot = nil
			}
			if len(a.Damage) == 0 {
				t.Errorf("%s: actor %q salvaged without a reason", what, a.Name)
			}
		}
		// A damaged newest meta page: the file is read as of the commit
		// before, which lacks what the last one wrote.
		fallback := slices.ContainsFunc(fs.Report.Problems, func(err error) bool {
			var de *durability.DamageError
			return errors.As(err, &de) && de.What == "meta page"
		})
		s, err = Open(dst, &Options{ReadOnly: true})
		if err != nil {
			t.Errorf("%s: Open of the new file: %v", what, err)
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			snap, events, err := readActor(s, name)
			if fallback && err == nil && bytes.Equal(snap, want[name].snapshot) {
				for i, d := range events {
					if !bytes.Equal(d, want[name].events[i]) {
						t.Errorf("%s: actor %q in the new file: event %d reads %q", what, name, i, d)
					}
				}
				continue
			}
			if err != nil || !bytes.Equal(snap, want[name].snapshot) || !maps.EqualFunc(events, want[name].events, bytes.Equal) {
				t.Errorf("%s: actor %q in the new file: %d events, snapshot %q, %v; want %d events, snapshot %q", what, name, len(events), snap, err, len(want[name].events), want[name].snapshot)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		os.Remove(dst)
	}
	t.Logf("%d pages zeroed: %d salvaged, %d refused", len(b)/4096, salvaged, refused)
	if salvaged == 0 {
		t.Error("nothing salvaged")
	}
}

// TestSalvageFile_Stopped ends SalvageFile's context once it has copied
// the file (Ctrl-C): it fails with an error wrapping the context's and
// leaves nothing in the new file's folder; the file is unchanged.
func TestSalvageFile_Stopped(t *testing.T) {
	path, _ := pagesFile(t, true)
	zeroBigActorPage(t, path)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	copiedChunk = cancel
	defer func() { copiedChunk = nil }()
	fs, err := SalvageFile(ctx, path, filepath.Join(dir, "salvaged.db"), &Options{NoSync: true})
	if !errors.Is(err, context.Canceled) || fs != nil {
		t.Errorf("SalvageFile stopped: %v %+v, want context.Canceled", err, fs)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		t.Errorf("left in the new file's folder: %v %v", left, err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, orig) {
		t.Errorf("SalvageFile changed the file (%v)", err)
	}
}

// TestSalvageFile_NoFreelistDamagedActor salvages a file that records no
// freelist (written by bbolt with NoFreelistSync) with a page of one actor
// broken, which a writable Open refuses (bbolt would read the broken pages
// to rebuild the freelist): the copy is given a freelist that lists no
// page free instead, and the actor is salvaged.
func TestSalvageFile_NoFreelistDamagedActor(t *testing.T) {
	path, want := pagesFile(t, false)
	dropFreelist(t, path)
	zeroBigActorPage(t, path)
	refusedUnchanged(t, path, "no freelist", "salvage")
	fs, err := SalvageFile(t.Context(), path, filepath.Join(t.TempDir(), "salvaged.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Actors) != 1 || fs.Actors[0].Name != "big" || !fs.Actors[0].SetAside || !fs.After.Intact() || len(fs.After.Actors) != len(want) {
		t.Errorf("SalvageFile: %+v; new file %+v", fs.Actors, fs.After)
	}
}

// TestSalvageFile_NewFileCreatedMeanwhile: a file created at the new
// file's name while SalvageFile copies is left alone, and the error names
// the new file, not the copy that was to become it.
func TestSalvageFile_NewFileCreatedMeanwhile(t *testing.T) {
	path, _ := pagesFile(t, true)
	dir := t.TempDir()
	dst := filepath.Join(dir, "salvaged.db")
	copiedChunk = func() {
		if _, err := os.Lstat(dst); err != nil {
			if err := os.WriteFile(dst, []byte("another's"), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { copiedChunk = nil }()
	fs, err := SalvageFile(t.Context(), path, dst, &Options{NoSync: true})
	if !errors.Is(err, os.ErrExist) || fs != nil || !strings.Contains(err.Error(), dst+" exists") || strings.Contains(err.Error(), ".salvaging-") {
		t.Errorf("SalvageFile: %v %+v, want an error saying %s exists, not naming the copy", err, fs, dst)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "another's" {
		t.Errorf("the file created at %s: %q %v", dst, b, err)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 1 {
		t.Errorf("left in the new file's folder: %v %v", left, err)
	}
}
