package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// pageWalked, when set (by tests), is called by checkTree before it
// reads each page.
var pageWalked func()

// tree is what [checkTree] found in the file's B+tree.
type tree struct {
	// pages holds, for each page below the high water mark, what reached
	// it: 0 for nothing, else 1 + the index of its owner in owners (the
	// owner of level 0 to 2 the page belongs to, see [owner]);
	// [validateFile] marks the pages the freelist lists with freePage,
	// and drops both once it has checked them.
	pages  []uint32
	owners []owner

	// actors holds the actors whose own pages are damaged: the walk of
	// their bucket stopped there. Open quarantines them (see
	// [quarantined]); the rest of the file is intact.
	actors map[string]*actorPages

	// setAside lists the buckets that [Store.Salvage] set aside (kept,
	// never read again, not walked, dropped by [Store.Compact]), and damage
	// found in the buckets that hold them.
	setAside []error

	// fallback, when set, says that the newest meta page is damaged and
	// the file was read from the other one (Options.MetaFallback).
	fallback error

	// freelist, when set, is the damage found in the freelist page, whose
	// Reason says what a writable Open does about it; freelistConflict
	// says that the freelist lists a page the tree uses. With rebuild, the
	// walk of the tree was whole and free lists the pages it did not
	// reach: a writable Open writes a new freelist of them (see
	// [rebuildFreelist]).
	freelist         *durability.DamageError
	freelistConflict bool
	// listedInUse lists the pages the freelist lists that the tree
	// reaches, when those are the freelist's only damage.
	listedInUse []uint64
	rebuild     bool
	free        []uint64

	// top lists the top-level buckets, and format is the format version
	// the meta bucket holds, so that a writable Open refuses a file that
	// is not one of this version's before it writes to it.
	top    []string
	format string
}

// layout returns the error [Store.load] would refuse the file with for
// its top-level buckets or its format version, or nil; the check of the
// log of a version 1 file is left to load.
func (t *tree) layout() error {
	if !slices.Contains(t.top, string(metaBucket)) || !slices.Contains(t.top, string(actorsBucket)) {
		return errNotAStore
	}
	return unsupportedFormat(t.format)
}

// actorPages is the damage found in the pages of one actor's bucket.
type actorPages struct {
	err *durability.DamageError
	// header is a copy of the actor bucket's value in the actors bucket
	// (bbolt's bucket header, then the inline page of a small bucket):
	// [Store.Salvage] reads what is left from it. The actor's pages do
	// not change while it is quarantined, so it stays true.
	header []byte
	// skip lists the pages that reads of header leave out, with all they
	// lead to: those the freelist lists (see [quarantineListed]), which
	// may be pages freed since, holding old records whose checksums
	// check.
	skip []uint64
}

// owner says to what a page of the tree belongs, for checkTree: a top-level
// bucket, and below the actors bucket (or the set-aside one) one actor
// bucket (one set-aside bucket), whose damage costs it alone.
type owner struct {
	level int    // 0: the root bucket; 1: a top-level bucket; 2 and more: below one
	top   string // the top-level bucket
	unit  string // the bucket below it (the actor's name under the actors bucket)
	id    uint32 // 1 + its index in the tree's owners, which holds the owners of levels 0 to 2
}

// freePage marks a page of [tree].pages that the freelist lists.
const freePage = ^uint32(0)

// inUse reports whether the walk of the tree reached page id.
func (t *tree) inUse(id uint64) bool {
	return id < uint64(len(t.pages)) && t.pages[id] != 0 && t.pages[id] != freePage
}

// child returns the owner of key's nested bucket, a bucket of o; one of
// level 1 or 2 is added to t's owners.
func (t *tree) child(o owner, key []byte) owner {
	switch o.level {
	case 0:
		o = owner{level: 1, top: string(key)}
	case 1:
		o = owner{level: 2, top: o.top, unit: string(key)}
	default:
		o.level++
		return o
	}
	return t.add(o)
}

// add adds o to t's owners, with its id.
func (t *tree) add(o owner) owner {
	t.owners = append(t.owners, o)
	o.id = uint32(len(t.owners))
	return o
}

// actor reports whether o is one actor's bucket, or below it.
func (o owner) actor() bool {
	return o.level >= 2 && o.top == string(actorsBucket)
}

// attributed reports whether damage to o's pages costs one actor (or a
// set-aside bucket) alone.
func (o owner) attributed() bool {
	return o.level >= 2 && (o.top == string(actorsBucket) || o.top == string(setAsideBucket))
}

// what names a page of o, for a DamageError.
func (o owner) what() string {
	switch {
	case o.level == 0:
		return "page of the root bucket"
	case o.top == string(actorsBucket) && o.level >= 2:
		return "page of actor " + quote.Name(o.unit, "actor name")
	case o.top == string(actorsBucket):
		return "page of the actors bucket (which actors it held cannot be told)"
	case o.top == string(walBucket):
		return "page of the log"
	case o.top == string(metaBucket):
		return fmt.Sprintf("page of the %q bucket (the format and the summary of the actors)", metaBucket)
	case o.top == string(setAsideBucket):
		return "page set aside by Salvage"
	}
	return fmt.Sprintf("page of bucket %q", o.top)
}

// fileWide is damage that checkTree cannot attribute to one actor even
// though it met it below one: a page that two actors (or an actor and
// another part of the file) reach.
type fileWide struct{ err error }

func (e *fileWide) Error() string { return e.err.Error() }
func (e *fileWide) Unwrap() error { return e.err }

// checkTree walks the B+tree of the file from the root bucket's page, as
// bbolt would reach it, and checks what bbolt reads without checks of its
// own: that every page reached is a branch or leaf page inside the high
// water mark, reached once, and that every element's key and value, and
// every inline bucket's page, lie inside their page. bbolt indexes into
// pages with unchecked pointer arithmetic, so these are the damages that
// make it read outside a page. It checks too that each page gives itself
// the id it is reached by, which bbolt asserts (a panic) on every read of
// it. It reads each page in use once.
//
// Damage in the pages of one actor's bucket (below the actors bucket's
// own pages) stops the walk of that bucket only: the actor is returned in
// the tree's actors, and the store never lets bbolt read those pages
// (the actor is quarantined). A bucket Salvage set aside is not walked
// (never read again, its broken pages may point anywhere); it is listed
// in the tree's setAside.
// A page counts as reached once it passed its own checks from the side
// of the bucket that reached it: a page that fails them (a broken
// pointer of an actor leads to a page of the log, whose keys lie outside
// what the actor's branch holds) is damage of that bucket alone, and
// its owner, walked later, reads it as usual. A page that two actors'
// buckets reach, checking from both sides, is damage of both (one points
// to a page of the other, which cannot be told). Damage anywhere else
// (the root, the log, the "polyweave" bucket, the actors bucket's own
// pages) or a page that two other buckets reach is an error naming the
// part of the file.
//
// It stops when ctx is done, with an error wrapping ctx's: a file of
// many pages takes long to walk.
func checkTree(ctx context.Context, f *os.File, path string, m meta) (*tree, error) {
	ps := int64(m.pageSize)
	t := &tree{pages: make([]uint32, m.pgid), actors: map[string]*actorPages{}}
	bad := func(o owner, off int64, format string, args ...any) error {
		return damaged(path, o.what(), off, format, args...)
	}
	// bufs holds a page buffer for each depth of the walk: a page is
	// done with once the walk of what it leads to returns, so the pages
	// of one depth take turns in one buffer.
	var bufs [][]byte
	// shared holds the actors that another actor reached a page of
	// (see walkPage), and the damage.
	shared := map[string]error{}
	// lo and hi bound the keys of a page a branch leads to: bbolt finds
	// a key by binary search, from the branch's key of the page (lo, the
	// lowest it may hold) to the next one (hi, above all it holds), so a
	// key out of that order could not be found, nor deleted.
	var walkPage func(id uint64, depth int, o owner, lo, hi []byte) error
	var checkElems func(p []byte, id uint64, off int64, depth int, o owner, lo, hi []byte) error
	var descendElems func(p []byte, id uint64, off int64, depth int, o owner, hi []byte) error
	// walkElems checks a page's elements and walks what they lead to.
	walkElems := func(p []byte, id uint64, off int64, depth int, o owner, lo, hi []byte) error {
		if err := checkElems(p, id, off, depth, o, lo, hi); err != nil {
			return err
		}
		return descendElems(p, id, off, depth, o, hi)
	}
	walkPage = func(id uint64, depth int, o owner, lo, hi []byte) error {
		off := int64(id) * ps
		if id < 2 || id >= m.pgid {
			return bad(o, -1, "a bucket or branch points to page %d, outside pages [2, %d)", id, m.pgid)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stopped while checking the pages of the file: %w", stopCause(ctx))
		}
		if pageWalked != nil {
			pageWalked()
		}
		for len(bufs) <= depth {
			bufs = append(bufs, make([]byte, ps))
		}
		buf := bufs[depth][:ps]
		if _, err := f.ReadAt(buf, off); err != nil {
			return bad(o, off, "page %d unreadable: %v", id, err)
		}
		overflow := uint64(binary.LittleEndian.Uint32(buf[12:]))
		if id+overflow >= m.pgid {
			return bad(o, off, "page %d: %d overflow pages run past the high water mark %d", id, overflow, m.pgid)
		}
		if self := binary.LittleEndian.Uint64(buf); self != id {
			// bbolt asserts it on every read of the page.
			return bad(o, off, "page %d identifies itself as page %d", id, self)
		}
		if overflow > 0 {
			size := int64(overflow+1) * ps
			if int64(cap(bufs[depth])) < size {
				bufs[depth] = append(bufs[depth][:ps], make([]byte, size-ps)...)
			}
			buf = bufs[depth][:size]
			if _, err := f.ReadAt(buf[ps:], off+ps); err != nil {
				return bad(o, off, "page %d unreadable: %v", id, err)
			}
		}
		// The page's own checks come before it counts as reached: a page
		// that fails them from o's side (o's pointer leads to a page of
		// another part of the file, or to a broken one) is o's damage
		// alone, and does not make the page's owner, walked later, look
		// as if two buckets reach its page.
		if err := checkElems(buf, id, off, depth, o, lo, hi); err != nil {
			return err
		}
		for p := id; p <= id+overflow; p++ {
			if seen := t.pages[p]; seen != 0 {
				err := bad(o, off, "page %d is reached twice in the tree", p)
				first := t.owners[seen-1]
				switch {
				case first.top == o.top && first.unit == o.unit && o.attributed():
					return err
				case first.actor() && o.actor():
					// One of two actors points to a page of the other
					// (a broken page of its own, or one past the end of
					// the file that the file has since given to the
					// other), and which cannot be told: both are
					// damaged, and read from their pages by Salvage.
					why := "page %d is reached twice in the tree, from actors %s and %s: one of them points to a page of the other"
					a, b := quote.Name(first.unit, "actor name"), quote.Name(o.unit, "actor name")
					if _, ok := shared[first.unit]; !ok {
						shared[first.unit] = bad(first, off, why, p, a, b)
					}
					return bad(o, off, why, p, a, b)
				}
				return &fileWide{err}
			}
			t.pages[p] = o.id
		}
		return descendElems(buf, id, off, depth, o, hi)
	}
	// key returns the key of element i of page p (flags: its kind).
	key := func(p []byte, flags uint16, i int) []byte {
		el := p[pageHeaderSize+16*i:]
		if flags == branchPage {
			return p[pageHeaderSize+16*i+int(binary.LittleEndian.Uint32(el)):][:binary.LittleEndian.Uint32(el[4:])]
		}
		return p[pageHeaderSize+16*i+int(binary.LittleEndian.Uint32(el[4:])):][:binary.LittleEndian.Uint32(el[8:])]
	}
	// checkElems checks a page's header and its elements: their keys in
	// order, inside the page and inside [lo, hi).
	checkElems = func(p []byte, id uint64, off int64, depth int, o owner, lo, hi []byte) error {
		if depth > 64 {
			return bad(o, off, "page %d: the tree is deeper than 64 levels", id)
		}
		if len(p) < pageHeaderSize {
			return bad(o, off, "page %d: shorter than a page header", id)
		}
		flags := binary.LittleEndian.Uint16(p[8:])
		count := int(binary.LittleEndian.Uint16(p[10:]))
		if flags != branchPage && flags != leafPage {
			return bad(o, off, "page %d has flags %#x, not a branch or leaf page", id, flags)
		}
		if flags == branchPage && count == 0 {
			return bad(o, off, "branch page %d has no elements", id)
		}
		if pageHeaderSize+16*count > len(p) {
			return bad(o, off, "page %d: %d elements do not fit in it", id, count)
		}
		kind := "leaf"
		if flags == branchPage {
			kind = "branch"
		}
		for i := range count {
			e := pageHeaderSize + 16*i
			el := p[e : e+16]
			if flags == branchPage {
				pos, ksize := int(binary.LittleEndian.Uint32(el)), int(binary.LittleEndian.Uint32(el[4:]))
				if e+pos+ksize > len(p) || ksize == 0 {
					return bad(o, off, "branch page %d, element %d: key outside the page", id, i)
				}
			} else {
				eflags := binary.LittleEndian.Uint32(el)
				pos, ksize, vsize := int(binary.LittleEndian.Uint32(el[4:])), int(binary.LittleEndian.Uint32(el[8:])), int(binary.LittleEndian.Uint32(el[12:]))
				if e+pos+ksize+vsize > len(p) || pos < 0 || ksize < 0 || vsize < 0 {
					return bad(o, off, "leaf page %d, element %d: key or value outside the page", id, i)
				}
				if eflags&^1 != 0 {
					return bad(o, off, "leaf page %d, element %d: unknown flags %#x", id, i, eflags)
				}
			}
			k := key(p, flags, i)
			switch {
			case i > 0 && bytes.Compare(key(p, flags, i-1), k) >= 0:
				return bad(o, off, "%s page %d, element %d: key out of order (not above the key before it)", kind, id, i)
			case i == 0 && lo != nil && bytes.Compare(k, lo) < 0:
				return bad(o, off, "%s page %d, element %d: key out of order (below the key of the branch that leads to the page)", kind, id, i)
			case hi != nil && bytes.Compare(k, hi) >= 0:
				return bad(o, off, "%s page %d, element %d: key out of order (not below the next key of the branch that leads to the page)", kind, id, i)
			}
		}
		return nil
	}
	// descendElems walks what the elements of a page checkElems passed
	// lead to: the pages of a branch, the buckets of a leaf.
	descendElems = func(p []byte, id uint64, off int64, depth int, o owner, hi []byte) error {
		flags := binary.LittleEndian.Uint16(p[8:])
		count := int(binary.LittleEndian.Uint16(p[10:]))
		for i := range count {
			e := pageHeaderSize + 16*i
			el := p[e : e+16]
			if flags == branchPage {
				next := hi
				if i+1 < count {
					next = key(p, flags, i+1)
				}
				if err := walkPage(binary.LittleEndian.Uint64(el[8:]), depth+1, o, key(p, flags, i), next); err != nil {
					return err
				}
				continue
			}
			pos, ksize, vsize := int(binary.LittleEndian.Uint32(el[4:])), int(binary.LittleEndian.Uint32(el[8:])), int(binary.LittleEndian.Uint32(el[12:]))
			key := p[e+pos : e+pos+ksize]
			v := p[e+pos+ksize : e+pos+ksize+vsize] // a bucket: its header, then an inline page if root is 0
			if binary.LittleEndian.Uint32(el)&1 == 0 {
				if o.level == 1 && o.top == string(metaBucket) && bytes.Equal(key, formatKey) {
					t.format = string(v)
				}
				continue
			}
			if o.level == 0 {
				t.top = append(t.top, string(key))
			}
			if o.top == string(setAsideBucket) && o.level >= 2 {
				// A bucket Salvage set aside is never read, by bbolt or
				// by this walk: its broken pages may point anywhere,
				// also to pages the file has since given to others.
				t.setAside = append(t.setAside, damaged(path, o.what(), off, "the bucket of actor %s, set aside by Salvage as its pages are broken: not read until Compact drops it", quote.Name(string(key), "actor name")))
				continue
			}
			c := t.child(o, key)
			err := walkBucket(v, id, off, depth, c, bad, walkPage, walkElems)
			var wide *fileWide
			switch {
			case err == nil:
			case c.attributed() && !o.attributed() && !errors.As(err, &wide):
				// The damage is one actor's (or one set-aside bucket's).
				var de *durability.DamageError
				if !errors.As(err, &de) {
					return err
				}
				if c.top == string(actorsBucket) {
					t.actors[c.unit] = &actorPages{err: de, header: slices.Clone(v)}
				} else {
					t.setAside = append(t.setAside, de)
				}
			default:
				return err
			}
		}
		return nil
	}
	err := walkPage(m.root, 0, t.add(owner{}), nil, nil)
	if wide := (*fileWide)(nil); errors.As(err, &wide) {
		err = wide.err
	}
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(shared)) {
		var de *durability.DamageError
		if t.actors[name] != nil || !errors.As(shared[name], &de) {
			continue
		}
		header := actorHeader(f, ps, m, name)
		if header == nil {
			return nil, shared[name]
		}
		t.actors[name] = &actorPages{err: de, header: header}
	}
	return t, nil
}

// actorHeader returns the value of actor name's bucket in the actors
// bucket of the file (see [actorPages]), read from its pages, or nil.
func actorHeader(f io.ReaderAt, ps int64, m meta, name string) []byte {
	root := binary.LittleEndian.AppendUint64(nil, m.root)
	root = binary.LittleEndian.AppendUint64(root, 0)
	for _, e := range rawBucket(f, ps, m.pgid, root, nil) {
		if !e.bucket || string(e.key) != string(actorsBucket) {
			continue
		}
		for _, a := range rawBucket(f, ps, m.pgid, e.value, nil) {
			if a.bucket && string(a.key) == name {
				return a.value
			}
		}
	}
	return nil
}

// walkBucket walks the bucket whose value (header, then inline page) is v,
// found on page id at off, owned by o.
func walkBucket(v []byte, id uint64, off int64, depth int, o owner,
	bad func(owner, int64, string, ...any) error,
	walkPage func(uint64, int, owner, []byte, []byte) error,
	walkElems func([]byte, uint64, int64, int, owner, []byte, []byte) error) error {
	if len(v) < 16 {
		return bad(o, off, "leaf page %d: bucket header cut short", id)
	}
	if root := binary.LittleEndian.Uint64(v); root != 0 {
		return walkPage(root, depth+1, o, nil, nil)
	}
	return walkElems(v[16:], id, off, depth+1, o, nil, nil)
}

// rawElem is a key and its value read by [rawBucket]; bucket says the
// value is a nested bucket's (bbolt's bucket header, then its inline page).
type rawElem struct {
	key, value []byte
	bucket     bool
}

// rawBucket reads the elements of a bucket whose value (header, then inline
// page) is v, from the file's pages (npages pages of ps bytes) rather than
// through bbolt, for an actor whose pages are damaged: it reads every page
// that checks (as [checkTree] checks them) and skips a damaged page with
// all it leads to, and so it does with the pages of skip. The elements
// are copies, in key order.
func rawBucket(f io.ReaderAt, ps int64, npages uint64, v []byte, skip []uint64) []rawElem {
	var out []rawElem
	seen := map[uint64]bool{}
	for _, id := range skip {
		seen[id] = true
	}
	var walkPage func(id uint64, depth int)
	var walkElems func(p []byte, depth int)
	walkPage = func(id uint64, depth int) {
		if id < 2 || id >= npages || seen[id] {
			return
		}
		var hdr [pageHeaderSize]byte
		if _, err := f.ReadAt(hdr[:], int64(id)*ps); err != nil {
			return
		}
		overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
		if id+overflow >= npages {
			return
		}
		for p := id; p <= id+overflow; p++ {
			if seen[p] {
				return
			}
			seen[p] = true
		}
		buf := make([]byte, int64(overflow+1)*ps)
		if _, err := f.ReadAt(buf, int64(id)*ps); err != nil {
			return
		}
		walkElems(buf, depth)
	}
	walkElems = func(p []byte, depth int) {
		if depth > 64 || len(p) < pageHeaderSize {
			return
		}
		flags := binary.LittleEndian.Uint16(p[8:])
		count := int(binary.LittleEndian.Uint16(p[10:]))
		if flags != branchPage && flags != leafPage || pageHeaderSize+16*count > len(p) {
			return
		}
		for i := range count {
			e := pageHeaderSize + 16*i
			el := p[e : e+16]
			if flags == branchPage {
				pos, ksize := int(binary.LittleEndian.Uint32(el)), int(binary.LittleEndian.Uint32(el[4:]))
				if e+pos+ksize > len(p) || ksize == 0 {
					return
				}
				walkPage(binary.LittleEndian.Uint64(el[8:]), depth+1)
				continue
			}
			eflags := binary.LittleEndian.Uint32(el)
			pos, ksize, vsize := int(binary.LittleEndian.Uint32(el[4:])), int(binary.LittleEndian.Uint32(el[8:])), int(binary.LittleEndian.Uint32(el[12:]))
			if e+pos+ksize+vsize > len(p) || pos < 0 || ksize < 0 || vsize < 0 || eflags&^1 != 0 {
				return
			}
			out = append(out, rawElem{
				key:    slices.Clone(p[e+pos : e+pos+ksize]),
				value:  slices.Clone(p[e+pos+ksize : e+pos+ksize+vsize]),
				bucket: eflags&1 != 0,
			})
		}
	}
	if len(v) < 16 {
		return nil
	}
	if root := binary.LittleEndian.Uint64(v); root != 0 {
		walkPage(root, 0)
	} else {
		walkElems(v[16:], 0)
	}
	return out
}

// rawActor reads what is left of an actor bucket whose pages are damaged
// (see [rawBucket]): the key/value pairs of its events and snapshots
// buckets that could be read, unchecked.
func rawActor(f io.ReaderAt, ps int64, npages uint64, header []byte, skip []uint64) (events, snapshots []rawElem) {
	for _, e := range rawBucket(f, ps, npages, header, skip) {
		if !e.bucket {
			continue
		}
		var all []rawElem
		for _, r := range rawBucket(f, ps, npages, e.value, skip) {
			if !r.bucket {
				all = append(all, r)
			}
		}
		switch string(e.key) {
		case string(eventsBucket):
			events = all
		case string(snapshotsBucket):
			snapshots = all
		}
	}
	return events, snapshots
}
