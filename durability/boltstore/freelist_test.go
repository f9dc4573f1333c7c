package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
)

// freelistAt returns the meta bbolt uses in the store file at path.
func freelistAt(t *testing.T, path string) meta {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, _, err := validateFile(t.Context(), f, path, false)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeAt writes b at off of the file at path.
func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// boltCheck runs bbolt's own consistency check on the file at path: every
// page below the high water mark reached by the tree or free, none both,
// none freed twice.
func boltCheck(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var errs []error
	_ = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	if len(errs) > 0 {
		t.Errorf("bbolt's check of the file: %v", errs)
	}
}

// TestOpen_FreelistBroken breaks the freelist page of a store whose tree
// is intact, the ways a torn or lost write of it or damage after it
// would: the records do not depend on it, so a read-only Open serves every
// actor, Verify reports the damage saying so, and a writable Open
// rebuilds the freelist from the tree, after which the file is sound
// (bbolt's check passes) and takes writes.
func TestOpen_FreelistBroken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, m meta)
	}{
		{"Zeroed", func(t *testing.T, path string, m meta) {
			writeAt(t, path, make([]byte, m.pageSize), int64(m.freelist)*int64(m.pageSize))
		}},
		{"OutOfRange", func(t *testing.T, path string, m meta) {
			writeAt(t, path, binary.LittleEndian.AppendUint64(nil, m.pgid+7), int64(m.freelist)*int64(m.pageSize)+pageHeaderSize)
		}},
		{"ListsItself", func(t *testing.T, path string, m meta) {
			writeAt(t, path, binary.LittleEndian.AppendUint64(nil, m.freelist), int64(m.freelist)*int64(m.pageSize)+pageHeaderSize)
		}},
		{"CountWraps", func(t *testing.T, path string, m meta) {
			// A count past 0xFFFF is the first element; this one times
			// 8 wraps around to 8 bytes.
			off := int64(m.freelist) * int64(m.pageSize)
			writeAt(t, path, []byte{0xff, 0xff}, off+10)
			writeAt(t, path, binary.LittleEndian.AppendUint64(nil, 1<<61|1), off+pageHeaderSize)
		}},
		{"Misnumbered", func(t *testing.T, path string, m meta) {
			// bbolt frees the page of the id the freelist page gives
			// itself at the first commit, here one of actor big's,
			// which the next commits overwrite.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			big := uint64(bytes.LastIndex(b, []byte("big event 150 ")) / int(m.pageSize))
			writeAt(t, path, binary.LittleEndian.AppendUint64(nil, big), int64(m.freelist)*int64(m.pageSize))
		}},
		{"Twice", func(t *testing.T, path string, m meta) {
			off := int64(m.freelist)*int64(m.pageSize) + pageHeaderSize
			b := make([]byte, 8)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.ReadAt(b, off+8)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			writeAt(t, path, b, off)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, want := pagesFile(t, true)
			m := freelistAt(t, path)
			tc.damage(t, path, m)

			ro, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open with the freelist broken: %v", err)
			}
			if failed := checkPages(t, ro, want, "read-only"); len(failed) > 0 {
				t.Errorf("read-only: %q fail", failed)
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Verify(path, nil)
			if err != nil || r.Unreadable != nil || r.Intact() || len(r.Actors) != len(want) {
				t.Fatalf("Verify: %v %+v", err, r)
			}
			if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Error(), fmt.Sprintf("freelist page %d", m.freelist)) || !strings.Contains(r.Problems[0].Error(), "rebuilds") {
				t.Errorf("Verify's problems %v: want the freelist page, saying that it is rebuilt", r.Problems)
			}
			for _, a := range r.Actors {
				if len(a.Damaged) > 0 {
					t.Errorf("Verify: actor %q damaged: %v", a.Name, a.Damaged)
				}
			}

			s, err := Open(path, &Options{NoSync: true})
			if err != nil {
				t.Fatalf("writable Open with the freelist broken and the tree intact: %v", err)
			}
			if failed := checkPages(t, s, want, "rebuilt"); len(failed) > 0 {
				t.Errorf("after the rebuild: %q fail", failed)
			}
			for i := range uint64(200) { // enough to reuse free pages
				data := fmt.Appendf(nil, "mid event %03d after the rebuild %s", 1000+i, strings.Repeat("r", 300))
				if err := s.PersistEvent(t.Context(), "mid", 1000+i, data); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			boltCheck(t, path)
			if r, err := Verify(path, nil); err != nil || !r.Intact() {
				t.Errorf("Verify after the rebuild: %v %+v", err, r)
			}
		})
	}
}

// TestOpen_FreelistBrokenRefused: a writable Open that cannot rebuild a
// broken freelist safely refuses the file, leaves it as it was and says
// how to recover: the freelist lists a page the tree uses outside the
// actors' buckets (either is damaged, and which cannot be told, and the
// damage is not one actor's), or the tree has broken pages of its
// own (a rebuild would take the pages only they lead to for free). A
// read-only Open reads it.
func TestOpen_FreelistBrokenRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, m meta)
		reason []string
		failed []string
	}{
		{"ListsTheRoot", func(t *testing.T, path string, m meta) {
			writeAt(t, path, binary.LittleEndian.AppendUint64(nil, m.root), int64(m.freelist)*int64(m.pageSize)+pageHeaderSize)
		}, []string{"in use", "salvage"}, nil},
		{"ZeroedWithADamagedActor", func(t *testing.T, path string, m meta) {
			zeroBigActorPage(t, path)
			writeAt(t, path, make([]byte, m.pageSize), int64(m.freelist)*int64(m.pageSize))
		}, []string{`page of actor "big"`, "salvage"}, []string{"big"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, want := pagesFile(t, false)
			tc.damage(t, path, freelistAt(t, path))
			refusedUnchanged(t, path, append([]string{"freelist"}, tc.reason...)...)
			var de *durability.DamageError
			if _, err := Open(path, &Options{NoSync: true}); !errors.As(err, &de) || de.What != "freelist page" {
				t.Errorf("writable Open: %v, want a DamageError of the freelist page", err)
			}
			ro, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open: %v", err)
			}
			defer ro.Close()
			if failed := checkPages(t, ro, want, "read-only"); !slices.Equal(failed, tc.failed) {
				t.Errorf("read-only: %q fail, want %q", failed, tc.failed)
			}
		})
	}
}

// TestOpen_FreelistBrokenUnknownFormat: a writable Open of a file of a
// format this version does not know, with a broken freelist, refuses it
// naming the format, and leaves it untouched: the freelist is rebuilt only
// in a file this version is to open.
func TestOpen_FreelistBrokenUnknownFormat(t *testing.T) {
	path, _ := pagesFile(t, false)
	setFileFormat(t, path, "7")
	m := freelistAt(t, path)
	writeAt(t, path, make([]byte, m.pageSize), int64(m.freelist)*int64(m.pageSize))
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{NoSync: true})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), `format "7"`) {
		t.Errorf("Open of format \"7\" with a broken freelist: %v, want a refusal naming the format", err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Errorf("Open of format \"7\" with a broken freelist changed the file (%v)", err)
	}
}

// TestOpen_FreelistListsAnActorPage: the freelist lists a page that one
// actor's bucket reaches, and the page checks from both sides (a broken
// entry of the freelist, or a broken pointer of the actor that leads to
// a page freed since). Which of the two is damaged cannot be told, but
// the damage is the actor's alone either way: a read-only Open takes the
// file, the actor fails with the damage (never serving a page that may
// be one freed since), the others read back what was written. A writable
// Open refuses the file (a freelist rebuilt from the tree would hide the
// damage from the next Open: see TestOpen_FreelistListsAnActorPageReopened),
// and SalvageFile recovers the actor with what is intact of it, the
// listed page left out.
func TestOpen_FreelistListsAnActorPage(t *testing.T) {
	path, want := pagesFile(t, false)
	m := freelistAt(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	big := uint64(bytes.LastIndex(b, []byte("big event 150 ")) / int(m.pageSize))
	writeAt(t, path, binary.LittleEndian.AppendUint64(nil, big), int64(m.freelist)*int64(m.pageSize)+pageHeaderSize)

	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open with the freelist listing a page of one actor: %v", err)
	}
	if failed := checkPages(t, s, want, "read-only"); !slices.Equal(failed, []string{"big"}) {
		t.Errorf("actors failing: %q, want big alone", failed)
	}
	_, _, err = readActor(s, "big")
	if err == nil || !strings.Contains(err.Error(), `page of actor "big"`) || !strings.Contains(err.Error(), "freelist") {
		t.Errorf("the error does not say where the damage is: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	refusedWritable(t, path, "big")
	// The listed page may be an old one, so its records are not kept,
	// though here they are the actor's own: the run kept ends before it.
	if n := len(salvageListed(t, path, want, "big").events); n == 0 || n > 150 {
		t.Errorf("SalvageFile kept %d events of 300, want those before the listed page, which holds event 150", n)
	}
}

// refusedWritable checks that a writable Open of path refuses the file,
// saying that the freelist lists a page of actor name.
func refusedWritable(t *testing.T, path, name string) {
	t.Helper()
	s, err := Open(path, &Options{NoSync: true})
	if err == nil {
		s.Close()
		t.Fatalf("a writable Open takes the file whose freelist lists a page of %q", name)
	}
	if !errors.Is(err, durability.ErrDamaged) || !strings.Contains(err.Error(), "a writable Open refuses the file") || !strings.Contains(err.Error(), fmt.Sprintf("bucket of %q alone", name)) {
		t.Errorf("writable Open: %v, not damage saying it refuses the file for the freelist and %q", err, name)
	}
}

// salvageListed salvages path into a new file with SalvageFile: name is
// the one actor salvaged, what it keeps of name reads back as written
// (no old record of a page freed since), and every other actor reads
// back whole. It returns what the new file holds of name.
func salvageListed(t *testing.T, path string, want map[string]*pagesActor, name string) *pagesActor {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "salvaged.db")
	fs, err := SalvageFile(t.Context(), path, dst, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("SalvageFile: %v", err)
	}
	if len(fs.Actors) != 1 || fs.Actors[0].Name != name || !fs.After.Intact() {
		t.Fatalf("SalvageFile: actors %+v, after %+v; want %q alone salvaged, the new file intact", fs.Actors, fs.After, name)
	}
	got := map[string]*pagesActor{}
	for n, a := range want {
		got[n] = a
	}
	kept := fs.Actors[0].Kept
	a := &pagesActor{events: map[uint64][]byte{}}
	for i := kept.From; i < kept.From+uint64(kept.Events); i++ {
		a.events[i] = want[name].events[i]
	}
	if kept.Snapshot {
		a.snapshot = want[name].snapshot
	}
	got[name] = a
	s, err := Open(dst, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if failed := checkPages(t, s, got, "salvaged"); len(failed) > 0 {
		t.Errorf("after SalvageFile: %q fail", failed)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestOpen_FreelistListsAnActorPageReopened: a pointer of an actor's
// bucket is broken to lead to the page its last leaf had before the last
// checkpoint, freed since (the freelist lists it) and holding old records
// of its own that check, one of them an older value of an event written
// again since. The conflict with the freelist is all that shows it: a
// read of part of the bucket is not compared with its summary, and would
// return the old value. So every read-only Open quarantines the actor,
// every writable Open refuses the file (a freelist rebuilt from the tree
// would hide the conflict from the next Open) however often it is tried,
// and SalvageFile keeps no old record.
func TestOpen_FreelistListsAnActorPageReopened(t *testing.T) {
	path, want := pagesFile(t, false)
	redirectToOldLeaf(t, path, want, false)
	for i, ro := range []bool{true, false, true, false} {
		if !ro {
			refusedWritable(t, path, "big")
			continue
		}
		s, err := Open(path, &Options{ReadOnly: ro, NoSync: true})
		if err != nil {
			t.Fatalf("Open %d (read-only): %v", i, err)
		}
		what := fmt.Sprintf("Open %d (read-only %t)", i, ro)
		if failed := checkPages(t, s, want, what); !slices.Equal(failed, []string{"big"}) {
			t.Errorf("%s: actors failing: %q, want big alone", what, failed)
		}
		// Reads that do not walk the whole bucket, which its summary
		// cannot check: from an index on, and up to one.
		for _, r := range [][2]uint64{{299, 0}, {250, 300}, {299, 300}} {
			if checkRange(t, s, "big", r[0], r[1], want["big"], what) {
				t.Errorf("%s: events [%d, %d) of big read back, want damage", what, r[0], r[1])
			}
		}
		if err := s.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
			t.Fatal(err)
		}
	}
	salvageListed(t, path, want, "big")
}

// TestOpen_FreelistListsAnActorPageAndGarbage: the freelist lists a page
// of actor "big" and an entry no freelist holds (a page past the end, its
// own page, a page twice), before or after it. The entry shows the
// freelist damaged, but not that it alone is: the pointer of "big" to the
// listed page may be broken as well, leading to a page freed since whose
// old records check, which a freelist rebuilt from the tree would hide
// from later Opens. So Open decides as for the listed page alone,
// whatever the entry and the order of the two: a read-only Open
// quarantines "big" and reads the other actors, a writable Open refuses
// the file, every time, and SalvageFile leaves the listed page out.
func TestOpen_FreelistListsAnActorPageAndGarbage(t *testing.T) {
	for _, garbage := range []string{"past the end", "its own page", "a page twice"} {
		for _, actorFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/actorFirst=%t", garbage, actorFirst), func(t *testing.T) {
				path, want, m, b, fl, big := freelistAndBig(t)
				if n := binary.LittleEndian.Uint16(b[fl+10:]); n < 3 || n == 0xFFFF {
					t.Fatalf("the freelist lists %d pages, want 3 to 65534", n)
				}
				g := map[string]uint64{
					"past the end": m.pgid + 5,
					"its own page": m.freelist,
					"a page twice": binary.LittleEndian.Uint64(b[fl+pageHeaderSize:]), // a free page
				}[garbage]
				ids := []uint64{big, g, g}
				if !actorFirst {
					slices.Reverse(ids)
				}
				var entries []byte
				for _, id := range ids {
					entries = binary.LittleEndian.AppendUint64(entries, id)
				}
				writeAt(t, path, entries, fl+pageHeaderSize)
				for i := range 2 {
					s, err := Open(path, &Options{ReadOnly: true})
					if err != nil {
						t.Fatalf("read-only Open %d: %v", i, err)
					}
					if failed := checkPages(t, s, want, "read-only"); !slices.Equal(failed, []string{"big"}) {
						t.Errorf("read-only Open %d: actors failing: %q, want big alone", i, failed)
					}
					if err := s.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
						t.Fatal(err)
					}
					refusedWritable(t, path, "big")
				}
				if n := len(salvageListed(t, path, want, "big").events); n == 0 || n > 150 {
					t.Errorf("SalvageFile kept %d events of 300, want those before the listed page, which holds event 150", n)
				}
			})
		}
	}
}

// checkRange reads the events of name in [from, to) (to 0: no bound)
// from s: they must be exactly those of want, or the read must fail with
// damage naming name. It reports whether the read succeeded.
func checkRange(t *testing.T, s *Store, name string, from, to uint64, want *pagesActor, what string) bool {
	t.Helper()
	got := map[uint64][]byte{}
	err := s.GetEvents(t.Context(), name, from, to, func(i uint64, d []byte) error { got[i] = bytes.Clone(d); return nil })
	var se *durability.StoreError
	switch {
	case err == nil:
		exp := maps.Clone(want.events)
		maps.DeleteFunc(exp, func(i uint64, _ []byte) bool { return i < from || to != 0 && i >= to })
		if !maps.EqualFunc(got, exp, bytes.Equal) {
			for i, d := range got {
				if !bytes.Equal(d, exp[i]) {
					t.Errorf("%s: %q event %d reads %.30q, written %.30q", what, name, i, d, exp[i])
				}
			}
			t.Errorf("%s: %q events [%d, %d): %d read, %d written", what, name, from, to, len(got), len(exp))
		}
		return true
	case !errors.Is(err, durability.ErrDamaged) || !errors.As(err, &se) || se.Name != name:
		t.Errorf("%s: %q events [%d, %d): %v, not a *durability.StoreError naming it with a DamageError", what, name, from, to, err)
	}
	return false
}

// redirectToOldLeaf writes event 300 of actor "big" in the pagesFile at
// path, and event 299 again, then breaks the pointer of a branch of big's
// events bucket that leads to its last leaf so that it leads to the page
// that leaf had before (freed since, holding old records of its own that
// check, event 299's older value among them). With dropFreelist the file
// is first rewritten as bbolt does with NoFreelistSync, so that no
// freelist lists the old page: nothing but big's summary knows of the
// damage.
func redirectToOldLeaf(t *testing.T, path string, want map[string]*pagesActor, dropFL bool) {
	t.Helper()
	s, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	data := fmt.Appendf(nil, "big event 300 %s", strings.Repeat("b", 150))
	if err := s.PersistEvent(t.Context(), "big", 300, data); err != nil {
		t.Fatal(err)
	}
	want["big"].events[300] = data
	// Event 299 written again: the old leaf's record of it is an older
	// value of the same key and index, whose checksum checks.
	data = fmt.Appendf(nil, "big event 299 written again %s", strings.Repeat("a", 150))
	if err := s.PersistEvent(t.Context(), "big", 299, data); err != nil {
		t.Fatal(err)
	}
	want["big"].events[299] = data
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leaf := func(pg []byte) bool { return binary.LittleEndian.Uint16(pg[8:]) == leafPage }
	pointToOldLeaf(t, path, "the last leaf of \"big\" before the checkpoint", func(pg []byte) bool {
		return leaf(pg) && bytes.Contains(pg, []byte("big event 299 ")) && !bytes.Contains(pg, []byte("big event 300 "))
	}, func(pg []byte) bool {
		return leaf(pg) && bytes.Contains(pg, []byte("big event 300 "))
	}, dropFL)
}

// pointToOldLeaf breaks the pointer of the branch page that leads to the
// leaf in use for which isCur holds so that it leads to the free page
// (what) for which isOld holds; with dropFL, it first rewrites the file
// as bbolt does with NoFreelistSync.
func pointToOldLeaf(t *testing.T, path, what string, isOld, isCur func(pg []byte) bool, dropFL bool) {
	t.Helper()
	m := freelistAt(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(m.pageSize)
	page := func(p uint64) []byte { return b[int(p)*ps : int(p+1)*ps] }
	free := map[uint64]bool{}
	fl := page(m.freelist)
	for i := range int(binary.LittleEndian.Uint16(fl[10:])) {
		free[binary.LittleEndian.Uint64(fl[pageHeaderSize+8*i:])] = true
	}
	var old, cur uint64
	for p := uint64(2); p < m.pgid; p++ {
		switch pg := page(p); {
		case free[p] && isOld(pg):
			old = p
		case !free[p] && isCur(pg):
			cur = p
		}
	}
	if old == 0 || cur == 0 {
		t.Fatalf("no free page holding %s (%d), or no page holding it now (%d)", what, old, cur)
	}
	at := -1
	for p := uint64(2); p < m.pgid; p++ {
		pg := page(p)
		if free[p] || binary.LittleEndian.Uint16(pg[8:]) != branchPage {
			continue
		}
		for i := range int(binary.LittleEndian.Uint16(pg[10:])) {
			if e := pageHeaderSize + 16*i + 8; binary.LittleEndian.Uint64(pg[e:]) == cur {
				at = int(p)*ps + e
			}
		}
	}
	if at < 0 {
		t.Fatalf("no branch page points to page %d", cur)
	}
	if dropFL {
		dropFreelist(t, path)
	}
	writeAt(t, path, binary.LittleEndian.AppendUint64(nil, old), int64(at))
}

// TestOpen_NoFreelistOldLeaf is TestOpen_FreelistListsAnActorPageReopened
// in a file that records no freelist: no freelist lists the old leaf the
// broken pointer leads to, so nothing at Open shows the damage, and
// big's summary is all that can. A read of the whole bucket is compared
// with it; so is one from an index on, which reaches the bucket's end,
// whose last index the summary names (the old leaf ends before event
// 300).
func TestOpen_NoFreelistOldLeaf(t *testing.T) {
	path, want := pagesFile(t, false)
	redirectToOldLeaf(t, path, want, true)
	failsAlone(t, path, want, "big", func(s *Store, what string) {
		for _, r := range [][2]uint64{{299, 0}, {250, 0}, {1, 0}, {250, 300}, {299, 300}} {
			if checkRange(t, s, "big", r[0], r[1], want["big"], what) {
				t.Errorf("%s: events [%d, %d) of big read back, want damage", what, r[0], r[1])
			}
		}
	})
}

// failsAlone opens path read-only, then for writing, and checks each
// time that every actor of want but name reads back what was written
// and that name fails with damage; then it calls more, if not nil.
func failsAlone(t *testing.T, path string, want map[string]*pagesActor, name string, more func(s *Store, what string)) {
	t.Helper()
	for _, ro := range []bool{true, false} {
		s, err := Open(path, &Options{ReadOnly: ro, NoSync: true})
		if err != nil {
			t.Fatalf("Open (read-only %t): %v", ro, err)
		}
		what := fmt.Sprintf("read-only %t", ro)
		if failed := checkPages(t, s, want, what); !slices.Equal(failed, []string{name}) {
			t.Errorf("%s: actors failing: %q, want %s alone", what, failed, name)
		}
		if more != nil {
			more(s, what)
		}
		if err := s.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
			t.Fatal(err)
		}
	}
}

// TestOpen_NoFreelistOldSnapshot: actor "snap" writes a snapshot too big
// to be kept inline, then another at the same index, in a later
// checkpoint, and its snapshots bucket's root pointer is broken to lead
// to the page of the first, freed since and holding it with a checksum
// that checks. The file records no freelist, so nothing at Open shows
// the damage. GetSnapshot reads the last snapshot, the one its summary
// names, and when the bucket holds a few (with KeepHistory, an earlier
// snapshot is kept beside it) the sum of their checksums, which the
// summary holds: the old one is refused as damaged.
func TestOpen_NoFreelistOldSnapshot(t *testing.T) {
	for _, kept := range []int{0, 1, maxSummedSnapshots - 1} {
		t.Run(fmt.Sprintf("%d kept", kept), func(t *testing.T) {
			path, want := pagesFile(t, false)
			pad := 2000 / (kept + 1)
			first := fmt.Appendf(nil, "snap state at 100 %s", strings.Repeat("o", pad))
			again := fmt.Appendf(nil, "snap state at 100 written again %s", strings.Repeat("n", pad))
			s, err := Open(path, &Options{NoSync: true, KeepHistory: true})
			if err != nil {
				t.Fatal(err)
			}
			for i := range kept {
				if err := s.PersistSnapshot(t.Context(), "snap", uint64(10*i), fmt.Appendf(nil, "snap state at %d %s", 10*i, strings.Repeat("k", pad))); err != nil {
					t.Fatal(err)
				}
			}
			for _, data := range [][]byte{first, again} {
				if err := s.PersistSnapshot(t.Context(), "snap", 100, data); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil { // checkpoints it
					t.Fatal(err)
				}
				if s, err = Open(path, &Options{NoSync: true, KeepHistory: true}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want["snap"] = &pagesActor{events: map[uint64][]byte{}, snapshot: again}
			m := freelistAt(t, path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ps := int(m.pageSize)
			// The root of snap's snapshots bucket, its pointer, and a leaf page
			// holding the first snapshot (the log's pages may hold copies too).
			old, at := -1, -1
			for p := 2; p < int(m.pgid); p++ {
				pg := b[p*ps : (p+1)*ps]
				if binary.LittleEndian.Uint16(pg[8:]) != leafPage {
					continue
				}
				if bytes.Contains(pg, first[:40]) {
					old = p
				}
				if i := bytes.Index(b, append([]byte("snapshots"), binary.LittleEndian.AppendUint64(nil, uint64(p))...)); i >= 0 && bytes.Contains(pg, again[:40]) {
					at = i + len("snapshots")
				}
			}
			if old < 0 || at < 0 {
				t.Fatalf("no leaf page holds the first snapshot (%d), or no snapshots bucket's root the second (%d)", old, at)
			}
			dropFreelist(t, path)
			writeAt(t, path, binary.LittleEndian.AppendUint64(nil, uint64(old)), int64(at))

			failsAlone(t, path, want, "snap", nil)
		})
	}
}

// TestOpen_FreelistHeaderAndAnActorPage: the freelist lists a page of
// actor "big", and its header is damaged too. Damage to the header does
// not end the freelist's check, which would have the writable Open
// rebuild the freelist from the tree and hide from later Opens a broken
// pointer of big that leads to a page freed since. A page that gives
// itself another id still delimits its list: the listed page is
// quarantined as with a sound header. A count or overflow that does not
// fit leaves the list's end unknown: the ids the page holds are read,
// and one in use refuses a writable Open, but a read-only Open reads
// every actor (past the real end the page may hold ids of an earlier
// freelist).
func TestOpen_FreelistHeaderAndAnActorPage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		header      func(m meta) (b []byte, at int64) // relative to the page
		quarantined []string
	}{
		{"misnumbered", func(m meta) ([]byte, int64) {
			return binary.LittleEndian.AppendUint64(nil, m.pgid+3), 0
		}, []string{"big"}},
		{"overflow past the end", func(m meta) ([]byte, int64) {
			return binary.LittleEndian.AppendUint32(nil, uint32(m.pgid)), 12
		}, nil},
		{"count past the page", func(m meta) ([]byte, int64) {
			return []byte{0xff, 0xff}, 10 // the count is then the first element: big's page id
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, want, m, _, fl, big := freelistAndBig(t)
			entries := binary.LittleEndian.AppendUint64(nil, big)
			if tc.name == "count past the page" {
				entries = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1<<40), big)
			}
			writeAt(t, path, entries, fl+pageHeaderSize)
			h, at := tc.header(m)
			writeAt(t, path, h, fl+at)

			ro, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open: %v", err)
			}
			if failed := checkPages(t, ro, want, "read-only"); !slices.Equal(failed, tc.quarantined) {
				t.Errorf("read-only: actors failing: %q, want %q", failed, tc.quarantined)
			}
			if err := ro.Close(); err != nil && !errors.Is(err, durability.ErrDamaged) {
				t.Fatal(err)
			}
			if tc.quarantined != nil {
				refusedWritable(t, path, "big")
				return
			}
			refusedUnchanged(t, path, "freelist", fmt.Sprintf("list page %d", big), "in use", "salvage")
		})
	}
}

// TestOpen_NoFreelistOldLeafLongRead: actor "long" holds 3000 events,
// more than one transaction of GetEvents reads, and event 1500 is
// written again, in a later checkpoint; a pointer of its events bucket
// is broken to lead to the page that leaf had before, freed since and
// holding event 1500's older value with a checksum that checks, in a
// file that records no freelist. A read of all its events, in pages of
// their own transactions read from the same commit, walks the whole
// bucket, and is compared with its summary as a read in one transaction
// is.
func TestOpen_NoFreelistOldLeafLongRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.db")
	events := map[uint64][]byte{}
	for round := range 2 {
		s, err := Open(path, &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(3000) {
			if round == 1 && i != 1500 {
				continue
			}
			data := fmt.Appendf(nil, "long event %04d %s", i, strings.Repeat("l", 60))
			if round == 1 {
				data = fmt.Appendf(nil, "long event %04d written again %s", i, strings.Repeat("a", 48))
			}
			if err := s.PersistEvent(t.Context(), "long", i, data); err != nil {
				t.Fatal(err)
			}
			events[i] = data
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A leaf of long's events bucket (not of the log): its first value
	// is an event's, its checksum then its data.
	eventsLeaf := func(pg []byte) bool {
		if binary.LittleEndian.Uint16(pg[8:]) != leafPage || binary.LittleEndian.Uint16(pg[10:]) == 0 {
			return false
		}
		e := pageHeaderSize
		pos, ksize, vsize := int(binary.LittleEndian.Uint32(pg[e+4:])), int(binary.LittleEndian.Uint32(pg[e+8:])), int(binary.LittleEndian.Uint32(pg[e+12:]))
		v := e + pos + ksize
		return ksize == 8 && v+vsize <= len(pg) && vsize > crcSize && bytes.HasPrefix(pg[v+crcSize:v+vsize], []byte("long event "))
	}
	pointToOldLeaf(t, path, "event 1500 as first written", func(pg []byte) bool {
		return eventsLeaf(pg) && bytes.Contains(pg, []byte("long event 1500 lll"))
	}, func(pg []byte) bool {
		return eventsLeaf(pg) && bytes.Contains(pg, []byte("long event 1500 written again"))
	}, true)

	s, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if checkRange(t, s, "long", 0, 0, &pagesActor{events: events}, "a read of every event") {
		t.Error("every event of long read back, want damage")
	}
}

// freelistAndBig writes a pagesFile and returns its path, what it holds,
// its meta, its bytes, the offset of its freelist page and the id of a
// page of actor big's (the one that holds event 150).
func freelistAndBig(t *testing.T) (path string, want map[string]*pagesActor, m meta, b []byte, fl int64, big uint64) {
	t.Helper()
	path, want = pagesFile(t, false)
	m = freelistAt(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fl = int64(m.freelist) * int64(m.pageSize)
	big = uint64(bytes.LastIndex(b, []byte("big event 150 ")) / int(m.pageSize))
	return path, want, m, b, fl, big
}
