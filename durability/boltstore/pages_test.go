package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// pagesActor is what pagesFile wrote of one actor.
type pagesActor struct {
	events   map[uint64][]byte
	snapshot []byte // at index 0, nil if none
}

// pagesFile writes a store of actors of several sizes: "big" (events over
// many pages, with branch pages), "mid" (a few pages) and small ones
// (inline buckets), each with a snapshot at 0, and closes it; with
// crashed, more events of every actor are then left in the log by a
// crash. It returns the file's path and what the store holds.
func pagesFile(t *testing.T, crashed bool) (string, map[string]*pagesActor) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.db")
	s, err := Open(path, &Options{NoSync: true, CheckpointOps: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]*pagesActor{}
	sizes := map[string]int{"big": 300, "mid": 40}
	for i := range 8 {
		sizes[fmt.Sprintf("small%d", i)] = 3
	}
	write := func(name string, from, to int, pad string) {
		a := want[name]
		if a == nil {
			a = &pagesActor{events: map[uint64][]byte{}, snapshot: fmt.Appendf(nil, "%s state at 0", name)}
			want[name] = a
			if err := s.PersistSnapshot(ctx, name, 0, a.snapshot); err != nil {
				t.Fatal(err)
			}
		}
		for i := from; i < to; i++ {
			data := fmt.Appendf(nil, "%s event %03d %s", name, i, pad)
			if err := s.PersistEvent(ctx, name, uint64(i), data); err != nil {
				t.Fatal(err)
			}
			a.events[uint64(i)] = data
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sizes)) {
		write(name, 0, sizes[name], strings.Repeat(name[:1], 150))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !crashed {
		return path, want
	}
	if s, err = Open(path, &Options{NoSync: true, CheckpointOps: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(sizes)) {
		write(name, sizes[name], sizes[name]+2, "in the log")
	}
	crash(t, s)
	return path, want
}

// readActor reads name's snapshot and events from s.
func readActor(s *Store, name string) (snapshot []byte, events map[uint64][]byte, err error) {
	ctx := context.Background()
	events = map[uint64][]byte{}
	if err := s.GetEvents(ctx, name, 0, 0, func(i uint64, d []byte) error { events[i] = bytes.Clone(d); return nil }); err != nil {
		return nil, nil, err
	}
	snap, ok, err := s.GetSnapshot(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		snapshot = snap.Data
	}
	return snapshot, events, nil
}

// checkPages reads every actor of s: each reads back exactly what want
// holds, or fails with damage naming it. It returns the actors that fail.
func checkPages(t *testing.T, s *Store, want map[string]*pagesActor, what string) []string {
	t.Helper()
	var failed []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		snap, events, err := readActor(s, name)
		var se *durability.StoreError
		switch {
		case err == nil:
			if !bytes.Equal(snap, want[name].snapshot) || !maps.EqualFunc(events, want[name].events, bytes.Equal) {
				t.Errorf("%s: actor %q read back %d events and snapshot %q, not what was written (%d events)", what, name, len(events), snap, len(want[name].events))
			}
		case !errors.Is(err, durability.ErrDamaged) || !errors.As(err, &se) || se.Name != name:
			t.Errorf("%s: actor %q: %v, not a *durability.StoreError naming it with a DamageError", what, name, err)
		default:
			failed = append(failed, name)
		}
	}
	return failed
}

// checkSalvaged salvages name and checks that it then reads back part of
// what was written: its snapshot and a run of its events, as Salvage says.
func checkSalvaged(t *testing.T, s *Store, name string, want *pagesActor, what string) {
	t.Helper()
	out, err := s.Salvage(context.Background(), name)
	if err != nil {
		t.Errorf("%s: Salvage(%q): %v", what, name, err)
		return
	}
	snap, events, err := readActor(s, name)
	if err != nil {
		t.Errorf("%s: after Salvage(%q) (%+v): %v", what, name, out, err)
		return
	}
	if out.Snapshot && !bytes.Equal(snap, want.snapshot) || !out.Snapshot && snap != nil {
		t.Errorf("%s: after Salvage(%q) (%+v): snapshot %q", what, name, out, snap)
	}
	if len(events) != out.Events {
		t.Errorf("%s: after Salvage(%q) (%+v): %d events", what, name, out, len(events))
	}
	for i, d := range events {
		if i < out.From || i >= out.From+uint64(out.Events) || !bytes.Equal(d, want.events[i]) {
			t.Errorf("%s: after Salvage(%q) (%+v): event %d reads %q", what, name, out, i, d)
		}
	}
	want.events = events
	want.snapshot = snap
}

// zeroPage writes a copy of orig at path with page p (of 4 KiB) zeroed.
// zeroBigActorPage zeroes the page of path that holds actor "big"'s
// event 150, a page of its own bucket.
func zeroBigActorPage(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zeroPage(t, path, b, bytes.LastIndex(b, []byte("big event 150 "))/4096)
}

func zeroPage(t *testing.T, path string, orig []byte, p int) {
	t.Helper()
	fillPage(t, path, orig, p, zeroBytes)
}

func zeroBytes(b []byte) { clear(b) }

// fillPage writes a copy of orig at path with page p (of 4 KiB) filled by
// fill.
func fillPage(t *testing.T, path string, orig []byte, p int, fill func([]byte)) {
	t.Helper()
	b := bytes.Clone(orig)
	fill(b[p*4096 : (p+1)*4096])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_DamagedActorPage zeroes a page of one actor's events (a torn
// or lost sector write): Open takes the file, the other actors read back
// exactly what was written, the damaged one fails with the damage until
// Salvage, which keeps what is intact; the damaged bucket, set aside,
// does not stop a later Open, and Compact drops it.
func TestOpen_DamagedActorPage(t *testing.T) {
	path, want := pagesFile(t, false)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(b, []byte("big event 150 "))
	if at < 0 {
		t.Fatal("event not found in the file")
	}
	zeroPage(t, path, b, at/4096)
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a read-only Open refuses a file whose damage is one actor's: %v", err)
	}
	if failed := checkPages(t, ro, want, "zeroed, read-only"); !slices.Equal(failed, []string{"big"}) {
		t.Errorf("read-only: actors failing: %q, want big alone", failed)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open refuses a file whose damage is one actor's: %v", err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, "zeroed"); !slices.Equal(failed, []string{"big"}) {
		t.Fatalf("actors failing: %q, want big alone", failed)
	}
	_, _, err = readActor(s, "big")
	if !strings.Contains(err.Error(), `page of actor "big"`) {
		t.Errorf("the error does not say where the damage is: %v", err)
	}
	if err := s.PersistEvent(t.Context(), "big", 300, []byte("more")); !errors.Is(err, durability.ErrDamaged) {
		t.Errorf("a write to the damaged actor: %v, want the damage", err)
	}
	if _, err := s.Compact(t.Context()); err == nil || !strings.Contains(err.Error(), "Salvage") {
		t.Errorf("Compact with an actor's pages damaged: %v, want a refusal that says to Salvage", err)
	}
	checkSalvaged(t, s, "big", want["big"], "zeroed")
	if len(want["big"].events) == 0 || len(want["big"].events) >= 300 {
		t.Errorf("Salvage kept %d events of 300, one page of them lost", len(want["big"].events))
	}
	if err := s.PersistEvent(t.Context(), "big", uint64(len(want["big"].events)), []byte("again")); err != nil {
		t.Fatalf("a write after Salvage: %v", err)
	}
	want["big"].events[uint64(len(want["big"].events))] = []byte("again")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := Verify(path, nil)
	if err != nil || !r.Intact() || len(r.SetAside) != 1 || len(r.Actors) != len(want) {
		t.Fatalf("Verify after Salvage: %v %+v", err, r)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatalf("Open after Salvage: %v", err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, "salvaged"); len(failed) > 0 {
		t.Errorf("after Salvage and a reopen, %q fail", failed)
	}
	if _, err := s.Compact(t.Context()); err != nil {
		t.Fatalf("Compact after Salvage: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := Verify(path, nil); err != nil || !r.Intact() || len(r.SetAside) != 0 {
		t.Fatalf("Verify after Compact: %v %+v", err, r)
	}
}

// TestOpen_EveryPageZeroed zeroes each page of a store in turn, with its
// log checkpointed and with a log left by a crash: Open refuses the file
// with an error naming what is damaged, or every actor but one reads back
// exactly what was written and that one fails with the damage; Verify
// reports the same actor, and Salvage of it keeps what reads back
// exactly. Nothing panics; nothing reads back different.
func TestOpen_EveryPageZeroed(t *testing.T) {
	t.Parallel()
	everyPage(t, []bool{false, true}, func(*rand.Rand, []byte) func([]byte) { return zeroBytes })
}

// TestOpen_EveryPageGarbled is TestOpen_EveryPageZeroed with each page
// filled with random bytes instead, half of them with the flags of a leaf
// page (so that the page's elements are read), in the store with a log.
func TestOpen_EveryPageGarbled(t *testing.T) {
	t.Parallel()
	everyPage(t, []bool{true}, func(rng *rand.Rand, _ []byte) func([]byte) {
		return func(b []byte) {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if rng.IntN(2) == 0 {
				binary.LittleEndian.PutUint16(b[8:], leafPage)
			}
		}
	})
}

// TestOpen_EveryPageMisnumbered is TestOpen_EveryPageZeroed with a byte
// of each page's id (the first 8 bytes of its header) changed instead:
// bbolt trusts the id a page gives itself (it frees the page of that id
// when it rewrites the page, and asserts it on reads), so a misnumbered
// page of an actor must cost that actor alone and be salvaged like any
// other broken page.
func TestOpen_EveryPageMisnumbered(t *testing.T) {
	t.Parallel()
	everyPage(t, []bool{false, true}, func(rng *rand.Rand, _ []byte) func([]byte) {
		return func(b []byte) { b[rng.IntN(8)] ^= byte(1 + rng.IntN(255)) }
	})
}

// everyPage damages each page of a store in turn with the filler that
// damage returns (see TestOpen_EveryPageZeroed), in the store with its
// log checkpointed, or left by a crash, or both (crashed).
func everyPage(t *testing.T, crashed []bool, damage func(*rand.Rand, []byte) func([]byte)) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, crashed := range crashed {
		t.Run(fmt.Sprintf("crashed=%v", crashed), func(t *testing.T) {
			src, orig := pagesFile(t, crashed)
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(memDir(t), "zeroed.db")
			refused, attributed := 0, 0
			for p := range len(b) / 4096 {
				what := fmt.Sprintf("page %d of %d", p, len(b)/4096)
				want := map[string]*pagesActor{}
				for name, a := range orig {
					want[name] = &pagesActor{events: maps.Clone(a.events), snapshot: a.snapshot}
				}
				fillPage(t, path, b, p, damage(rng, b))
				r, verr := Verify(path, nil)
				s, err := Open(path, &Options{NoSync: true})
				if err != nil {
					var de *durability.DamageError
					if !errors.As(err, &de) || !strings.Contains(err.Error(), " is damaged: ") || strings.Contains(err.Error(), "page of actor") {
						t.Errorf("%s: Open: %v, not an error naming what is damaged", what, err)
					}
					refused++
					continue
				}
				failed := checkPages(t, s, want, what)
				if len(failed) > 1 {
					t.Errorf("%s: one page costs %q", what, failed)
				}
				if verr != nil || r.Unreadable != nil || len(r.Actors) != len(want) {
					t.Errorf("%s: Verify: %v %+v", what, verr, r)
				} else {
					var damaged []string
					for _, a := range r.Actors {
						if len(a.Damaged) > 0 {
							damaged = append(damaged, a.Name)
						}
					}
					if !slices.Equal(damaged, failed) {
						t.Errorf("%s: Verify reports %q damaged, the store fails %q", what, damaged, failed)
					}
				}
				for _, name := range failed {
					attributed++
					checkSalvaged(t, s, name, want[name], what)
				}
				if err := s.Close(); err != nil {
					t.Errorf("%s: Close: %v", what, err)
					continue
				}
				if len(failed) == 0 {
					continue
				}
				if s, err = Open(path, &Options{NoSync: true}); err != nil {
					t.Errorf("%s: Open after Salvage: %v", what, err)
					continue
				}
				if again := checkPages(t, s, want, what+", salvaged and reopened"); len(again) > 0 {
					t.Errorf("%s: after Salvage and a reopen, %q fail", what, again)
				}
				if err := s.Close(); err != nil {
					t.Errorf("%s: Close: %v", what, err)
				}
			}
			t.Logf("%d pages: %d refused by Open, %d cost one actor alone", len(b)/4096, refused, attributed)
			if attributed == 0 {
				t.Error("no page was attributed to one actor")
			}
		})
	}
}

// TestOpen_DamagedActorPage_FormatV2 zeroes a page of one actor's events
// in a file of format "2": the upgrade Open makes rewrites every actor, so
// a writable Open refuses the file, saying how to read the other actors;
// a read-only Open reads them.
func TestOpen_DamagedActorPage_FormatV2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if err := m.Put(formatKey, []byte(formatVersionV2)); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(walBucket); err != nil {
			return err
		}
		actors, err := tx.CreateBucket(actorsBucket)
		if err != nil {
			return err
		}
		for name, n := range map[string]int{"big": 300, "small": 3} {
			a, err := actors.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			ev, err := a.CreateBucket(eventsBucket)
			if err != nil {
				return err
			}
			for i := range n {
				if err := ev.Put(indexKey(uint64(i)), fmt.Appendf(nil, "%s event %03d %s", name, i, strings.Repeat("x", 150))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	zeroBigActorPage(t, path)
	if _, err := Open(path, &Options{NoSync: true}); err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("writable Open of a format 2 file with an actor's page damaged: %v, want a refusal naming the actor and the way out", err)
	}
	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, events, err := readActor(s, "small"); err != nil || len(events) != 3 {
		t.Errorf("small: %d events, %v", len(events), err)
	}
	if _, _, err := readActor(s, "big"); !errors.Is(err, durability.ErrDamaged) {
		t.Errorf("big: %v, want the damage", err)
	}
}

// TestVerify_CopyHasNoName verifies a held file, whose consistent copy
// Verify takes in the temporary folder: the copy has no name there while
// it is verified (an interrupted or killed verify leaves nothing), and
// none is left after.
func TestVerify_CopyHasNoName(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	path, _ := pagesFile(t, false)
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var during []os.DirEntry
	verifyCopied = func(*os.File) { during, _ = os.ReadDir(tmp) }
	defer func() { verifyCopied = nil }()
	r, err := Verify(path, &Options{OpenTimeout: 10 * time.Millisecond})
	if err != nil || r.Copy == "" || !r.Intact() {
		t.Fatalf("Verify of a held file: %v %+v", err, r)
	}
	after, _ := os.ReadDir(tmp)
	if runtime.GOOS == "windows" {
		during = nil // the name of an open file stays: Verify removes it when it returns
	}
	if len(during)+len(after) > 0 {
		t.Errorf("the temporary folder holds %v while the copy is verified, %v after", during, after)
	}
}

// TestOpen_PageReachedTwice points a pointer of actor big at another
// page. The first child of big's events (a branch page) at a page of
// big's own, or at mid's events, both pages whose keys lie outside what
// the branch leads to: big alone is damaged (the page fails big's checks,
// so it is not big's), and mid reads back whole. big's events bucket's
// root (which bounds no keys) at mid's events: the page checks from both
// sides, which of the two points to the other's page cannot be told,
// both are damaged, and Salvage keeps what is intact of each (all of
// mid, whose pages are whole).
func TestOpen_PageReachedTwice(t *testing.T) {
	path, want := pagesFile(t, false)
	roots := map[string]uint64{}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var bigPage uint64
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"big", "mid"} {
			roots[name] = uint64(tx.Bucket(actorsBucket).Bucket([]byte(name)).Bucket(eventsBucket).Root())
		}
		bigPage = uint64(tx.Bucket(actorsBucket).Bucket([]byte("big")).Root())
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := orig[roots["big"]*4096:]
	if binary.LittleEndian.Uint16(root[8:]) != branchPage || binary.LittleEndian.Uint16(root[10:]) < 2 {
		t.Fatal("big's events have no branch page with two children")
	}
	child1 := binary.LittleEndian.Uint64(root[16+16+8:])
	// big's events bucket's header: its root page's id after the key
	// "events" in the leaf page of big's bucket.
	header := bytes.Index(orig[bigPage*4096:(bigPage+1)*4096], append(slices.Clone(eventsBucket), binary.LittleEndian.AppendUint64(nil, roots["big"])...))
	if bigPage == 0 || header < 0 {
		t.Fatalf("big's bucket has no page of its own holding its events bucket's header (page %d)", bigPage)
	}
	for _, c := range []struct {
		what string
		at   uint64 // the offset of the pointer in the file
		to   uint64
		fail []string
	}{
		{"big's branch at big's own page", roots["big"]*4096 + 16 + 8, child1, []string{"big"}},
		{"big's branch at mid's page", roots["big"]*4096 + 16 + 8, roots["mid"], []string{"big"}},
		{"big's events root at mid's page", bigPage*4096 + uint64(header) + uint64(len(eventsBucket)), roots["mid"], []string{"big", "mid"}},
	} {
		b := bytes.Clone(orig)
		binary.LittleEndian.PutUint64(b[c.at:], c.to)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			t.Fatalf("%s: Open: %v", c.what, err)
		}
		if failed := checkPages(t, s, want, c.what); !slices.Equal(failed, c.fail) {
			t.Errorf("%s: actors failing: %q, want %q", c.what, failed, c.fail)
		}
		if len(c.fail) == 2 {
			w := map[string]*pagesActor{"big": {events: maps.Clone(want["big"].events), snapshot: want["big"].snapshot}, "mid": {events: maps.Clone(want["mid"].events), snapshot: want["mid"].snapshot}}
			checkSalvaged(t, s, "big", w["big"], c.what)
			checkSalvaged(t, s, "mid", w["mid"], c.what)
			if len(w["mid"].events) != len(want["mid"].events) {
				t.Errorf("%s: Salvage of mid, whose pages are whole, kept %d events of %d", c.what, len(w["mid"].events), len(want["mid"].events))
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpen_ActorBranchAtLogPage points the last child of big's events (a
// branch page) at the root page of the log of a file left by a crash:
// the log's keys lie outside what that branch leads to, so the page is
// not big's. Open quarantines big alone (the page does not count as
// reached by big, so the log is not taken for a page two buckets reach),
// replays the log, the other actors read back whole with their writes in
// the log, and Salvage keeps what is intact of big.
func TestOpen_ActorBranchAtLogPage(t *testing.T) {
	path, want := pagesFile(t, true)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var big, wal uint64
	err = db.View(func(tx *bolt.Tx) error {
		big = uint64(tx.Bucket(actorsBucket).Bucket([]byte("big")).Bucket(eventsBucket).Root())
		wal = uint64(tx.Bucket(walBucket).Root())
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := b[big*4096:]
	n := int(binary.LittleEndian.Uint16(root[10:]))
	if binary.LittleEndian.Uint16(root[8:]) != branchPage || n < 2 || wal == 0 {
		t.Fatalf("big's events have no branch page with two children (%d), or the log no page of its own (%d)", n, wal)
	}
	binary.LittleEndian.PutUint64(root[pageHeaderSize+16*(n-1)+8:], wal)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open with big's branch at the log's page: %v, want big quarantined alone", err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, "big's branch at the log"); !slices.Equal(failed, []string{"big"}) {
		t.Errorf("actors failing: %q, want big alone", failed)
	}
	checkSalvaged(t, s, "big", want["big"], "big's branch at the log")
	if failed := checkPages(t, s, want, "salvaged"); len(failed) > 0 {
		t.Errorf("after Salvage, %q fail", failed)
	}
}

// dropFreelist rewrites the store file at path as bbolt does with
// NoFreelistSync: its meta page then records no freelist, which bbolt
// rebuilds, when it opens the file for writing, by reading every bucket.
func dropFreelist(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(*bolt.Tx) error { return nil })
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

// refusedUnchanged opens path for writing, which must fail with a
// DamageError whose text holds every string of want, and leave the file
// as it was.
func refusedUnchanged(t *testing.T, path string, want ...string) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{NoSync: true})
	if err == nil {
		s.Close()
		t.Fatalf("writable Open of the damaged file: no error, want a refusal that says %q", want)
	}
	t.Logf("refused: %v", err)
	var de *durability.DamageError
	if !errors.As(err, &de) {
		t.Errorf("writable Open: %v, not a DamageError", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("writable Open: %v; want it to say %q", err, w)
		}
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the refused Open changed the file (%v)", err)
	}
}

// TestOpen_NoFreelistDamagedActor damages a page of one actor in a file
// that records no freelist (written by bbolt with NoFreelistSync): bbolt
// would rebuild the freelist, when opening it for writing, by reading
// every bucket, the damaged one too, on a goroutine of its own where a
// panic cannot be recovered. A writable Open refuses the file, naming the
// actor, its page and why, and leaves it as it was; a read-only Open and
// Verify read the other actors.
func TestOpen_NoFreelistDamagedActor(t *testing.T) {
	path, want := pagesFile(t, false)
	dropFreelist(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(b, []byte("big event 150 "))
	if at < 0 {
		t.Fatal("event not found in the file")
	}
	zeroPage(t, path, b, at/4096)
	refusedUnchanged(t, path, `page of actor "big"`, fmt.Sprintf("page %d", at/4096), "no freelist", "ReadOnly")
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	if failed := checkPages(t, ro, want, "read-only"); !slices.Equal(failed, []string{"big"}) {
		t.Errorf("read-only: failing %q, want big alone", failed)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(path, nil)
	if err != nil || r.Unreadable != nil || len(r.Actors) != len(want) {
		t.Fatalf("Verify: %v %+v", err, r)
	}
	for _, a := range r.Actors {
		if a.Pages != (a.Name == "big") || len(a.Damaged) > 0 != (a.Name == "big") {
			t.Errorf("Verify: actor %q: pages damaged %v, damage %v", a.Name, a.Pages, a.Damaged)
		}
	}
}

// TestOpen_NoFreelistSetAside is TestOpen_NoFreelistDamagedActor for the
// damaged bucket that Salvage set aside, kept in the file until Compact:
// once the file records no freelist, bbolt would read it too.
func TestOpen_NoFreelistSetAside(t *testing.T) {
	path, want := pagesFile(t, false)
	zeroBigActorPage(t, path)
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSalvaged(t, s, "big", want["big"], "set aside")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dropFreelist(t, path)
	refusedUnchanged(t, path, "set aside by Salvage", "no freelist", "ReadOnly")
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	defer ro.Close()
	if failed := checkPages(t, ro, want, "read-only"); len(failed) > 0 {
		t.Errorf("read-only: failing %q", failed)
	}
}

// TestVerify_HeldDamagedActor verifies a file held by a store with an
// actor's pages damaged: the copy Verify takes is read as the file would
// be (bbolt reads no bucket of it on its own), and reports that actor,
// naming the file (not the copy, which has no name a user could use).
func TestVerify_HeldDamagedActor(t *testing.T) {
	path, want := pagesFile(t, false)
	zeroBigActorPage(t, path)
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := Verify(path, &Options{OpenTimeout: 10 * time.Millisecond})
	if err != nil || r.Copy == "" || r.Unreadable != nil || len(r.Actors) != len(want) {
		t.Fatalf("Verify of a held file: %v %+v", err, r)
	}
	for _, a := range r.Actors {
		if a.Pages != (a.Name == "big") {
			t.Errorf("Verify: actor %q: pages damaged %v", a.Name, a.Pages)
		}
		for _, err := range a.Damaged {
			var de *durability.DamageError
			if !errors.As(err, &de) || de.Store != path {
				t.Errorf("Verify: actor %q: %v, not a DamageError naming %s", a.Name, err, path)
			}
		}
	}
}

// TestNoBoltWalkOfEveryBucket checks that the store calls none of bbolt's
// functions that read every bucket of the file on their own (Tx.Check,
// Bucket.Inspect and Bucket.Stats, Tx.Copy, WriteTo and CopyFile,
// bolt.Compact, Options.PreLoadFreelist): they would read the pages of a
// quarantined actor or of a bucket set aside, which the store must never
// let bbolt read (Tx.Check reads them on a goroutine of its own, where a
// panic ends the process). Its own walks (Compact's copy, Verify's copy,
// the page check at Open) skip those pages.
func TestNoBoltWalkOfEveryBucket(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	walkers := map[string]bool{"Check": true, "Inspect": true, "WriteTo": true, "CopyFile": true}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok && types.ExprString(kv.Key) == "PreLoadFreelist" {
				t.Errorf("%s: PreLoadFreelist reads every bucket of a file that records no freelist", fset.Position(kv.Pos()))
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			recv := types.ExprString(sel.X)
			switch {
			case walkers[sel.Sel.Name],
				sel.Sel.Name == "Compact" && recv == "bolt",
				sel.Sel.Name == "Stats" && recv != "s.db", // DB.Stats only counts
				sel.Sel.Name == "Copy" && recv != "maps" && recv != "io" && recv != "slices":
				t.Errorf("%s: %s.%s reads every bucket of the file through bbolt", fset.Position(sel.Pos()), recv, sel.Sel.Name)
			}
			return true
		})
	}
}

// TestOpen_KeyOutOfOrder changes a byte of the key of actor big's event
// 150, which puts it out of order in its page: bbolt finds a key by
// binary search, so it could neither find nor delete that key, nor some
// of those next to it. Open attributes the page to big like any broken
// page, Salvage of big keeps what is intact, and big then reads back
// whole, also after a reopen.
func TestOpen_KeyOutOfOrder(t *testing.T) {
	path, want := pagesFile(t, false)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(b, []byte("big event 150 "))
	page := at / 4096 * 4096
	key := bytes.LastIndex(b[page:at], binary.BigEndian.AppendUint64(nil, 150))
	if at < 0 || key < 0 {
		t.Fatal("event 150 or its key not found in the file")
	}
	b[page+key+1] = 0xf3
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if failed := checkPages(t, s, want, "key out of order"); !slices.Equal(failed, []string{"big"}) {
		t.Errorf("actors failing: %q, want big alone", failed)
	}
	checkSalvaged(t, s, "big", want["big"], "key out of order")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatalf("Open after Salvage: %v", err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, "salvaged and reopened"); len(failed) > 0 {
		t.Errorf("after Salvage and a reopen, %q fail", failed)
	}
}

// TestOpen_SetAsideBranchPastTheEnd breaks a branch page of actor big so
// that it points past the end of the file, salvages big (its bucket is
// set aside, unread) and writes on until the file has grown past that
// page, which another part of the file then uses: the bucket set aside
// must not be walked into it, or every later Open (and salvage) would
// refuse the whole file for a page two buckets reach.
func TestOpen_SetAsideBranchPastTheEnd(t *testing.T) {
	path, want := pagesFile(t, false)
	past := breakBigBranch(t, path)
	s, err := Open(path, &Options{NoSync: true, CheckpointOps: 16})
	if err != nil {
		t.Fatal(err)
	}
	if failed := checkPages(t, s, want, "branch past the end"); !slices.Equal(failed, []string{"big"}) {
		t.Fatalf("actors failing: %q, want big alone", failed)
	}
	checkSalvaged(t, s, "big", want["big"], "branch past the end")
	data := []byte(strings.Repeat("g", 500))
	for i := range uint64(400) {
		if err := s.PersistEvent(t.Context(), "grow", i, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if m := freelistAt(t, path); m.pgid <= past+10 {
		t.Fatalf("the file did not grow past page %d (%d pages)", past, m.pgid)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatalf("Open once the file has grown past the page the set-aside bucket points to: %v", err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, "salvaged, grown and reopened"); len(failed) > 0 {
		t.Errorf("after Salvage, growth and a reopen, %q fail", failed)
	}
	if _, err := s.Compact(t.Context()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
}

// TestOpen_BranchPastTheEndGrownInto breaks a branch page of actor big
// so that it points past the end of the file, and writes on, big
// quarantined, until the file has grown past that page, which actor
// grow then uses (or the freelist lists): the page's keys lie outside
// what big's branch leads to, so a later Open takes the page for grow's
// (or a free one), quarantines big alone and reads grow whole; Salvage
// keeps what is intact of big.
func TestOpen_BranchPastTheEndGrownInto(t *testing.T) {
	path, want := pagesFile(t, false)
	past := breakBigBranch(t, path)
	s, err := Open(path, &Options{NoSync: true, CheckpointOps: 16})
	if err != nil {
		t.Fatal(err)
	}
	if failed := checkPages(t, s, want, "branch past the end"); !slices.Equal(failed, []string{"big"}) {
		t.Fatalf("actors failing: %q, want big alone", failed)
	}
	grow := &pagesActor{events: map[uint64][]byte{}}
	for i := range uint64(400) {
		data := fmt.Appendf(nil, "grow event %03d %s", i, strings.Repeat("g", 500))
		if err := s.PersistEvent(t.Context(), "grow", i, data); err != nil {
			t.Fatal(err)
		}
		grow.events[i] = data
	}
	want["grow"] = grow
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, tr, err := validateFile(t.Context(), f, path, false)
	f.Close()
	if err != nil {
		t.Fatalf("Open once the file has grown past the page big points to: %v", err)
	}
	if m.pgid <= past || tr.freelist != nil || tr.actors["big"] == nil || tr.actors["grow"] != nil {
		t.Errorf("file of %d pages, freelist damage %v, damaged actors %v; want past page %d, no freelist damage, big alone damaged", m.pgid, tr.freelist, tr.actors, past)
	}
	if s, err = Open(path, &Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if failed := checkPages(t, s, want, "grown into"); !slices.Equal(failed, []string{"big"}) {
		t.Errorf("actors failing: %q, want big alone", failed)
	}
	checkSalvaged(t, s, "big", want["big"], "grown into")
	if failed := checkPages(t, s, want, "salvaged"); len(failed) > 0 {
		t.Errorf("after Salvage, %q fail", failed)
	}
}

// breakBigBranch points the first element of the branch page at the root
// of actor big's events bucket in the store file at path past the end
// of the file, and returns that page.
func breakBigBranch(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	err = db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket(actorsBucket).Bucket([]byte("big")).Bucket(eventsBucket).RootPage())
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	m := freelistAt(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := b[root*uint64(m.pageSize):]
	if binary.LittleEndian.Uint16(page[8:]) != branchPage {
		t.Fatalf("big's events bucket's root page %d is not a branch page", root)
	}
	past := m.pgid + 3
	binary.LittleEndian.PutUint64(page[pageHeaderSize+8:], past)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return past
}
