package boltstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
)

// bbolt's on-disk structures that Open checks before bbolt maps the file
// (go.etcd.io/bbolt internal/common: page.go, meta.go). A page starts
// with a 16-byte header: id (8), flags (2), count (2), overflow (4).
const (
	pageHeaderSize = 16
	metaSize       = 64 // magic, version, pageSize, flags, root (16), freelist, pgid, txid, checksum
	metaSumOffset  = 56 // the checksum covers the meta up to here
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	branchPage     = 0x01
	leafPage       = 0x02
	metaPage       = 0x04
	freelistPage   = 0x10
	noFreelist     = ^uint64(0)
	minPageSize    = 1024
	maxPageSize    = 1 << 24
)

// meta is a decoded bbolt meta page.
type meta struct {
	page     int // 0 or 1
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use or free
	txid     uint64
}

// damaged returns the error for a damaged part of the file at path.
func damaged(path, what string, offset int64, format string, args ...any) error {
	return &durability.DamageError{Store: path, What: what, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

// readMeta decodes the meta page at offset off of f, or says why it is
// not valid.
func readMeta(f *os.File, page int, off int64) (meta, error) {
	var b [pageHeaderSize + metaSize]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return meta{}, fmt.Errorf("unreadable: %w", err)
	}
	if flags := binary.LittleEndian.Uint16(b[8:]); flags != metaPage {
		return meta{}, fmt.Errorf("page flags %#x, want a meta page", flags)
	}
	m := b[pageHeaderSize:]
	if magic := binary.LittleEndian.Uint32(m); magic != boltMagic {
		return meta{}, fmt.Errorf("no bbolt magic number (%#x)", magic)
	}
	if v := binary.LittleEndian.Uint32(m[4:]); v != boltVersion {
		return meta{}, fmt.Errorf("bbolt version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	if sum := binary.LittleEndian.Uint64(m[metaSumOffset:]); sum != h.Sum64() {
		return meta{}, errors.New("checksum mismatch")
	}
	return meta{
		page:     page,
		pageSize: binary.LittleEndian.Uint32(m[8:]),
		root:     binary.LittleEndian.Uint64(m[16:]),
		freelist: binary.LittleEndian.Uint64(m[32:]),
		pgid:     binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}, nil
}

// validateFile checks what bbolt relies on before it maps an existing file
// and reads it without checks of its own: that the file is a bbolt file
// (size, page alignment, a meta page with a good checksum), that the meta
// page bbolt will use points inside the file (a truncated file would
// otherwise be mapped past its end and fault), and that the freelist page
// bbolt loads at open is one. It returns the meta bbolt will use.
//
// Damage found in the pages of one actor's bucket does not refuse the
// file: it costs that actor alone, and is returned in the tree's actors
// (see [checkTree]). It stops, with ctx's error, when ctx is done.
func validateFile(ctx context.Context, f *os.File, path string, metaFallback bool) (meta, *tree, error) {
	fi, err := f.Stat()
	if err != nil {
		return meta{}, nil, err
	}
	size := fi.Size()
	if size == 0 {
		return meta{}, nil, damaged(path, "file", 0, "the file is empty (0 bytes), not a store; only a path that does not exist creates a new store")
	}
	m0, err0 := readMeta(f, 0, 0)
	var metas []meta
	if err0 == nil && m0.pageSize >= minPageSize && m0.pageSize <= maxPageSize {
		metas = append(metas, m0)
	}
	// bbolt finds the second meta page by trying the page sizes it
	// supports; so do we, preferring the first page's size.
	sizes := []int64{}
	if len(metas) > 0 {
		sizes = append(sizes, int64(m0.pageSize))
	}
	for ps := int64(minPageSize); ps <= maxPageSize; ps *= 2 {
		sizes = append(sizes, ps)
	}
	var err1 error = errors.New("not found")
	for _, ps := range sizes {
		if 2*ps > size {
			break
		}
		m1, err := readMeta(f, 1, ps)
		if err == nil && int64(m1.pageSize) == ps {
			metas, err1 = append(metas, m1), nil
			break
		}
		if len(metas) > 0 && ps == int64(m0.pageSize) {
			err1 = err
		}
	}
	if len(metas) == 0 {
		if size < 2*minPageSize {
			return meta{}, nil, damaged(path, "file", 0, "%d bytes: too short for a store (no bbolt header)", size)
		}
		return meta{}, nil, damaged(path, "meta pages", 0, "neither meta page is valid (page 0: %v; page 1: %v): not a bbolt file, or its header is destroyed", err0, err1)
	}
	var fallback error
	if len(metas) == 1 {
		bad, why := 1-metas[0].page, err1
		if metas[0].page == 1 {
			why = err0
		}
		if !metaFallback {
			return meta{}, nil, damaged(path, "meta page", int64(bad)*int64(metas[0].pageSize),
				"meta page %d is damaged (%v); bbolt would fall back to meta page %d (transaction %d) and lose the last commit if it was the newer one: refused (Options.MetaFallback accepts it)",
				bad, why, metas[0].page, metas[0].txid)
		}
		fallback = damaged(path, "meta page", int64(bad)*int64(metas[0].pageSize),
			"meta page %d is damaged (%v); read from meta page %d (transaction %d), the state before the last commit: that commit is lost if it was the newer one",
			bad, why, metas[0].page, metas[0].txid)
	}
	// bbolt uses the valid meta with the highest transaction id.
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	ps := int64(m.pageSize)
	metaOff := int64(m.page) * ps
	if size%ps != 0 {
		return meta{}, nil, damaged(path, "file", size, "size %d is not a multiple of the page size %d (truncated?)", size, ps)
	}
	if m.pgid < 2 || m.pgid > uint64(size/ps) {
		return meta{}, nil, damaged(path, "file", size, "meta page %d says the file has %d pages of %d bytes, but it has %d bytes (truncated)", m.page, m.pgid, ps, size)
	}
	if m.root < 2 || m.root >= m.pgid {
		return meta{}, nil, damaged(path, "meta page", metaOff, "meta page %d: root page %d outside pages [2, %d)", m.page, m.root, m.pgid)
	}
	var hdr [pageHeaderSize + 8]byte
	if _, err := f.ReadAt(hdr[:], int64(m.root)*ps); err != nil {
		return meta{}, nil, damaged(path, "root page", int64(m.root)*ps, "root page %d unreadable: %v", m.root, err)
	}
	if fl := binary.LittleEndian.Uint16(hdr[8:]); fl != branchPage && fl != leafPage {
		return meta{}, nil, damaged(path, "root page", int64(m.root)*ps, "root page %d has flags %#x, not a branch or leaf page", m.root, fl)
	}
	t, err := checkTree(ctx, f, path, m)
	if err != nil {
		return meta{}, nil, err
	}
	t.fallback = fallback
	defer func() { t.pages, t.owners = nil, nil }() // the walk's, done with
	if m.freelist == noFreelist {
		return m, t, nil
	}
	ferr, conflict := checkFreelist(f, path, m, t)
	if ferr == nil {
		return m, t, nil
	}
	// The records do not depend on the freelist: bbolt reads it only to
	// hand out pages for writing (not at all for a read-only file).
	t.freelist, t.freelistConflict = ferr, conflict
	rebuild := func() {
		t.rebuild = true
		for id := uint64(2); id < m.pgid; id++ {
			if !t.inUse(id) {
				t.free = append(t.free, id)
			}
		}
	}
	switch dmg := damagedPages(t); {
	case conflict && dmg == nil && t.listedInUse != nil:
		// Either the freelist or a pointer of the actors that reach the
		// listed pages is damaged, and which cannot be told; but the
		// damage is theirs either way (a broken pointer of one of them
		// leads to a page freed since, whose records may be old ones of
		// its own, with checksums that check). They are quarantined. The
		// freelist is not rebuilt: the conflict is all that shows the
		// damage (a read of part of a bucket is not compared with its
		// summary), and a freelist rebuilt from the tree would hide it
		// from the next Open, which would serve those old records; so a
		// writable Open refuses the file, every time, and SalvageFile
		// recovers it.
		names := quarantineListed(f, path, m, t)
		if names == nil {
			ferr.Reason += conflictRefused
			break
		}
		ferr.Reason += fmt.Sprintf("; the tree reaches it (and any other page listed in use) from the bucket of %s alone, which is quarantined (either its pointer, which may lead to a page of old records freed since, or the freelist is damaged, and which cannot be told): a read-only Open reads the other actors; a writable Open refuses the file, as a freelist rebuilt from the tree would hide the damage from later Opens (polyweave-store salvage copies what is intact into a new file)", quote.Names(names, "actor name"))
	case conflict:
		ferr.Reason += conflictRefused
	case dmg != nil:
		ferr.Reason += fmt.Sprintf("; the records do not depend on it, but a %s is damaged too (%s), so which pages are free cannot be told from the tree: a writable Open refuses the file (a read-only one reads it; polyweave-store salvage copies what is intact into a new file)", dmg.What, dmg.Reason)
	default:
		rebuild()
		ferr.Reason += "; the records do not depend on it: a writable Open rebuilds it from the tree, which is intact"
	}
	return m, t, nil
}

// conflictRefused ends the Reason of a freelist that lists a page the
// tree uses, other than an actor's.
const conflictRefused = "; either the freelist or the tree that uses the page is damaged, and which cannot be told: a writable Open refuses the file (a read-only one reads it; polyweave-store salvage copies what is intact into a new file)"

// quarantineListed puts in t.actors each actor whose bucket reaches a
// page of t.listedInUse (the pages the freelist lists that the tree
// uses), with that damage and those pages to leave out when Salvage or
// Verify reads the actor from its pages (they may be pages freed since,
// holding old records that check), and returns their names; or
// nil, and leaves t as it was, if a page is reached from anywhere else.
func quarantineListed(f *os.File, path string, m meta, t *tree) []string {
	ps := int64(m.pageSize)
	found := map[string]*durability.DamageError{}
	skip := map[string][]uint64{}
	for _, id := range t.listedInUse {
		o := t.owners[t.pages[id]-1]
		if !o.actor() {
			return nil
		}
		skip[o.unit] = append(skip[o.unit], id)
		if found[o.unit] == nil {
			found[o.unit] = &durability.DamageError{Store: path, What: o.what(), Offset: int64(id) * ps,
				Reason: fmt.Sprintf("page %d, which the freelist page %d lists as free, is reached from it: either its pointer to the page (which may hold old records of its own) or the freelist is damaged, and which cannot be told; quarantined (a writable Open refuses the file: polyweave-store salvage copies what is intact into a new file)", id, m.freelist)}
		}
	}
	headers := map[string][]byte{}
	for name := range found {
		if headers[name] = actorHeader(f, ps, m, name); headers[name] == nil {
			return nil
		}
	}
	var names []string
	for _, name := range slices.Sorted(maps.Keys(found)) {
		t.actors[name] = &actorPages{err: found[name], header: headers[name], skip: skip[name]}
		names = append(names, name)
	}
	return names
}

// checkFreelist checks the freelist page m names against the pages the
// walk of the tree t reached: it returns the damage found, if any, and
// whether it is a page that both the freelist and the tree claim (one of
// the two is damaged), rather than damage of the freelist alone. It marks
// the pages the freelist lists in t.
func checkFreelist(f *os.File, path string, m meta, t *tree) (err *durability.DamageError, conflict bool) {
	ps := int64(m.pageSize)
	metaOff := int64(m.page) * ps
	bad := func(off int64, format string, args ...any) *durability.DamageError {
		return &durability.DamageError{Store: path, What: "freelist page", Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return bad(metaOff, "meta page %d: freelist page %d outside pages [2, %d)", m.page, m.freelist, m.pgid), false
	}
	var hdr [pageHeaderSize + 8]byte
	flOff := int64(m.freelist) * ps
	if _, err := f.ReadAt(hdr[:], flOff); err != nil {
		return bad(flOff, "freelist page %d unreadable: %v", m.freelist, err), false
	}
	if fl := binary.LittleEndian.Uint16(hdr[8:]); fl != freelistPage {
		return bad(flOff, "freelist page %d has flags %#x, not a freelist page", m.freelist, fl), t.inUse(m.freelist)
	}
	// A damaged header does not end the check: the ids the page holds are
	// read all the same, as the page may be the freelist's only damage or
	// not (see the loop below), and a page they list that the tree uses
	// makes a conflict.
	var garbage *durability.DamageError // the first entry no freelist holds, or a damaged id
	if id := binary.LittleEndian.Uint64(hdr[:]); id != m.freelist {
		// bbolt frees the pages of the id the page gives itself at the
		// next commit: pages in use would be reused.
		garbage = bad(flOff, "freelist page %d identifies itself as page %d", m.freelist, id)
	}
	count, overflow := uint64(binary.LittleEndian.Uint16(hdr[10:])), uint64(binary.LittleEndian.Uint32(hdr[12:]))
	idsOff := flOff + pageHeaderSize
	if count == 0xFFFF { // the real count is the first element
		count = binary.LittleEndian.Uint64(hdr[pageHeaderSize:])
		idsOff += 8
	}
	// count is compared in ids, not bytes: a damaged count times 8 can
	// wrap around.
	if m.freelist+overflow >= m.pgid || count > uint64(flOff+int64(overflow+1)*ps-idsOff)/8 {
		return listedPastHeader(f, bad(flOff, "freelist page %d: %d ids over %d overflow pages do not fit in the file", m.freelist, count, overflow), m, t, idsOff, count)
	}
	// A page of the freelist that the tree reaches refuses the file,
	// also when an actor's bucket alone reaches it (see the package
	// doc): its ids cannot be told from the tree's page, so which
	// pages the freelist lists in use is not known.
	for p := m.freelist; p <= m.freelist+overflow; p++ {
		if t.inUse(p) {
			return bad(flOff, "freelist page %d: its page %d is in use by the tree", m.freelist, p), true
		}
	}
	ids := make([]byte, count*8)
	if _, err := f.ReadAt(ids, idsOff); err != nil {
		return bad(flOff, "freelist page %d unreadable: %v", m.freelist, err), false
	}
	var inUse *durability.DamageError // the first page listed that the tree uses
	var listed []uint64               // all of them
	// An entry no freelist holds (outside the file, its own page, a page
	// twice) shows the freelist damaged, but not that it alone is: a
	// pointer of the tree to a page it lists may be broken as well,
	// leading to a page freed since. So the whole list is read, and a
	// page listed that the tree uses makes a conflict whatever else the
	// list holds, met before it or after, as if the list were sound.
	for i := range count {
		id := binary.LittleEndian.Uint64(ids[8*i:])
		off := idsOff + int64(8*i)
		switch {
		case id < 2 || id >= m.pgid:
			if garbage == nil {
				garbage = bad(off, "freelist page %d lists page %d, outside pages [2, %d)", m.freelist, id, m.pgid)
			}
			continue
		case t.inUse(id):
			// bbolt would hand the page out while it is in use: the
			// next commit would overwrite live data. The rest of the
			// list is checked, for every such page (see
			// [tree].listedInUse).
			if inUse == nil {
				inUse = bad(off, "freelist page %d lists page %d, which is in use", m.freelist, id)
			}
			if !slices.Contains(listed, id) {
				listed = append(listed, id)
			}
			continue
		case id >= m.freelist && id <= m.freelist+overflow:
			if garbage == nil {
				garbage = bad(off, "freelist page %d lists page %d, which is its own", m.freelist, id)
			}
			continue
		case t.pages[id] == freePage:
			// bbolt would hand the page out twice.
			if garbage == nil {
				garbage = bad(off, "freelist page %d lists page %d twice", m.freelist, id)
			}
			continue
		}
		t.pages[id] = freePage
	}
	if inUse != nil {
		if garbage != nil {
			inUse.Reason += fmt.Sprintf(" (and at offset %d %s)", garbage.Offset, strings.TrimPrefix(garbage.Reason, fmt.Sprintf("freelist page %d ", m.freelist)))
		}
		t.listedInUse = listed
		return inUse, true
	}
	if garbage != nil {
		return garbage, false
	}
	return nil, false
}

// listedPastHeader completes e, the damage of a freelist whose count or
// overflow does not fit in the file, so that the list's end cannot be
// told: the ids its first page holds (at most count, read from idsOff)
// are read, and one the tree uses makes a conflict that refuses a
// writable Open, as a freelist that lists it would, instead of the
// rebuild that would hide a broken pointer to a page freed since (see
// the package doc). Past the list's real end the page may hold ids of
// an earlier freelist, so the actors that use them are not quarantined
// (a read-only Open reads them; what a page with a sound count lists
// is quarantined).
//
// The first page alone is read: it is the freelist's whatever its header
// says, since the meta page names it, while the pages after it are the
// freelist's only as far as the overflow, or the count, says, and here
// one of them is damaged, most often both (they share the header's
// bytes, which a torn or lost sector write damages together). A page
// of the tree read as ids would list its own id, in use, first, and so
// refuse for sure a file whose damage may be the header's alone; a
// free page read as ids lists whatever it held. A freelist whose ids go
// on past its first page is read in part: a page it lists there that
// the tree uses is not found, and the writable Open rebuilds the
// freelist.
func listedPastHeader(f *os.File, e *durability.DamageError, m meta, t *tree, idsOff int64, count uint64) (*durability.DamageError, bool) {
	ps := int64(m.pageSize)
	end := int64(m.freelist+1) * ps
	if idsOff >= end {
		return e, false
	}
	n := min(count, uint64(end-idsOff)/8)
	ids := make([]byte, n*8)
	if _, err := f.ReadAt(ids, idsOff); err != nil {
		return e, false
	}
	for i := range n {
		if id := binary.LittleEndian.Uint64(ids[8*i:]); id >= 2 && id < m.pgid && t.inUse(id) {
			e.Reason += fmt.Sprintf(", and the ids its page holds list page %d (at offset %d), which is in use", id, idsOff+int64(8*i))
			return e, true
		}
	}
	return e, false
}

// damagedPages returns the first damage t found in the pages of an actor
// or of a bucket set aside, or nil when the walk of the tree was whole.
func damagedPages(t *tree) *durability.DamageError {
	var de *durability.DamageError
	if len(t.actors) > 0 {
		return t.actors[slices.Sorted(maps.Keys(t.actors))[0]].err
	}
	if len(t.setAside) > 0 && errors.As(t.setAside[0], &de) {
		return de
	}
	return nil
}

// rebuildFreelist replaces the broken freelist of the file f, open for
// writing, whose meta m names it, by one that lists the pages free: it
// writes a freelist page after the last page, then a meta page for the
// next transaction that names it, as a bbolt commit would (with fsyncs
// in between unless noSync), so that a crash leaves the old state or the
// new. bbolt frees the page at its first commit.
func rebuildFreelist(f *os.File, m meta, free []uint64, noSync bool) error {
	ps := int64(m.pageSize)
	n := uint64(len(free))
	size := int64(pageHeaderSize) + 8*int64(n)
	if n >= 0xFFFF {
		size += 8
	}
	pages := (size + ps - 1) / ps
	page := make([]byte, pages*ps)
	binary.LittleEndian.PutUint64(page, m.pgid)
	binary.LittleEndian.PutUint16(page[8:], freelistPage)
	binary.LittleEndian.PutUint32(page[12:], uint32(pages-1))
	ids := page[pageHeaderSize:]
	if n >= 0xFFFF {
		binary.LittleEndian.PutUint16(page[10:], 0xFFFF)
		binary.LittleEndian.PutUint64(ids, n)
		ids = ids[8:]
	} else {
		binary.LittleEndian.PutUint16(page[10:], uint16(n))
	}
	for i, id := range slices.Sorted(slices.Values(free)) {
		binary.LittleEndian.PutUint64(ids[8*i:], id)
	}
	if _, err := f.WriteAt(page, int64(m.pgid)*ps); err != nil {
		return fmt.Errorf("rebuilding the freelist: %w", err)
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("rebuilding the freelist: %w", err)
		}
	}
	var mp [pageHeaderSize + metaSize]byte
	if _, err := f.ReadAt(mp[:], int64(m.page)*ps); err != nil {
		return fmt.Errorf("rebuilding the freelist: %w", err)
	}
	txid := m.txid + 1
	slot := int64(txid % 2)
	binary.LittleEndian.PutUint64(mp[:], uint64(slot))
	md := mp[pageHeaderSize:]
	binary.LittleEndian.PutUint64(md[32:], m.pgid)
	binary.LittleEndian.PutUint64(md[40:], m.pgid+uint64(pages))
	binary.LittleEndian.PutUint64(md[48:], txid)
	h := fnv.New64a()
	h.Write(md[:metaSumOffset])
	binary.LittleEndian.PutUint64(md[metaSumOffset:], h.Sum64())
	if _, err := f.WriteAt(mp[:], slot*ps); err != nil {
		return fmt.Errorf("rebuilding the freelist: %w", err)
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("rebuilding the freelist: %w", err)
		}
	}
	return nil
}

// stopCause is the error of a step that ctx, done, stopped: ctx's cause
// (context.Cause, which says why it ended: a signal, a -timeout), and
// ctx.Err() too when the cause is another error, so that errors.Is
// tells a cancellation from a deadline whatever the cause.
func stopCause(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || errors.Is(cause, err) {
		return err
	}
	return fmt.Errorf("%w (%w)", cause, err)
}

// lockRetried, when set (by tests), is called by lockFile each time it
// finds the file held, before it waits to try again.
var lockRetried func()

// lockFile takes the store's lock on f (exclusive, or shared when
// readOnly; see tryLock), retrying until timeout. A file still held then
// gives an error that says so, naming the path and, where the system
// tells, the holding process. It stops waiting, with ctx's error, when
// ctx is done.
func lockFile(ctx context.Context, f *os.File, path string, readOnly bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		held, err := tryLock(f, readOnly)
		if err != nil {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		if held {
			return nil
		}
		if time.Now().After(deadline) {
			holder := lockHolder(f)
			if holder == "" {
				holder = "another process (or another open store of this process)"
			}
			return &lockedError{msg: fmt.Sprintf("%s is held by %s (waited %v for it)", path, holder, timeout)}
		}
		if lockRetried != nil {
			lockRetried()
		}
		retry := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			retry.Stop()
			return fmt.Errorf("stopped while waiting for the lock on %s: %w", path, stopCause(ctx))
		case <-retry.C:
		}
	}
}

// lockedError says who holds a store file. It is durability.ErrLocked
// (errors.Is) without that error's text, which speaks of another process
// even when the holder is another store of this one.
type lockedError struct{ msg string }

func (e *lockedError) Error() string { return e.msg }
func (e *lockedError) Unwrap() error { return durability.ErrLocked }

// findLockHolder reads /proc/locks lines ("1: FLOCK  ADVISORY  WRITE 1234
// 08:01:5678 0 EOF") for a flock on inode ino and names its holder:
// "another process (pid N)", or "another open store of this process".
func findLockHolder(r io.Reader, ino uint64, self int) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		if fields[4] == "->" { // a waiter: "1: -> FLOCK ..."
			continue
		}
		dev := strings.Split(fields[5], ":")
		var pid int
		var node uint64
		if len(dev) != 3 {
			continue
		}
		if _, err := fmt.Sscan(fields[4], &pid); err != nil {
			continue
		}
		if _, err := fmt.Sscan(dev[2], &node); err != nil || node != ino {
			continue
		}
		if pid == self {
			return "another open store of this process"
		}
		return fmt.Sprintf("another process (pid %d)", pid)
	}
	return ""
}

// guard runs fn, which calls into bbolt, so that damage bbolt trips over
// becomes an error instead of taking the process down: a panic (bbolt's
// own assertions, an index out of range on a broken page) is recovered,
// and a memory fault on the mapped file (a page past a shrunken file's
// end) panics instead of crashing, through debug.SetPanicOnFault, and is
// recovered too. The error says the file is damaged and, for a fault,
// where.
func guard(path, doing string, data func() uintptr, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		var fault interface{ Addr() uintptr }
		if e, ok := r.(error); ok && errors.As(e, &fault) && data != nil {
			if base := data(); base != 0 && fault.Addr() >= base {
				off := int64(fault.Addr() - base)
				err = damaged(path, "file", off, "memory fault at byte %d of the mapped file while %s (is the file truncated?)", off, doing)
				return
			}
		}
		err = damaged(path, "file", -1, "bbolt failed while %s: %v", doing, r)
	}()
	return fn()
}

// boltInfo returns a function that gives the address of db's mapping,
// for guard.
func boltInfo(db *bolt.DB) func() uintptr {
	return func() uintptr { return safeBase(db) }
}

// notRegular returns the error for a store path that exists but is not a
// regular file (a folder, a FIFO, a device, a socket), or nil: such a path
// is never opened as a store (opening a FIFO would block, a folder would
// read as damage).
func notRegular(path string, fi os.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch m := fi.Mode(); {
	case m.IsDir():
		kind = "a folder, not a store file"
	case m&os.ModeNamedPipe != 0:
		kind = "a FIFO (named pipe), not a regular file"
	case m&os.ModeSocket != 0:
		kind = "a socket, not a regular file"
	case m&os.ModeDevice != 0:
		kind = "a device, not a regular file"
	}
	return &notRegularError{path: path, kind: kind}
}

// notRegularError says that a store path is not a regular file.
type notRegularError struct{ path, kind string }

func (e *notRegularError) Error() string { return e.path + " is " + e.kind }

// regularFile checks that f, opened at path, is a regular file (see
// [notRegular]).
func regularFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return notRegular(path, fi)
}
