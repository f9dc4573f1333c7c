package boltstore

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/internal/quote"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// Checksums catch a damaged record, not a missing one: a damaged page
// header or branch can make bbolt skip records without any value failing
// its check. So each actor bucket keeps a summary of what its events and
// snapshots buckets hold (how many records, the lowest and highest index,
// the sum of their checksums), and the store keeps a directory summary of
// the actor buckets (how many, the sum of their names' checksums). The
// checkpoint maintains them; a read that walks a whole bucket, and Open
// for the directory, compare; a read of part of a bucket compares the
// indexes it meets (see [indexCheck]).
var (
	summaryKey   = []byte("summary")
	directoryKey = []byte("actors")
)

// Checksum kinds of the summaries (outside durability's record kinds).
const (
	summaryKind   durability.RecordKind = 0x41
	directoryKind durability.RecordKind = 0x42
)

// bucketStat summarizes one events or snapshots bucket.
type bucketStat struct {
	count    uint64
	min, max uint64 // indexes of the first and last entry, if count > 0
	sum      uint32 // sum of the entries' stored checksums
}

// summary is an actor bucket's summary.
type summary struct {
	events, snapshots bucketStat
}

const statSize = 8 + 8 + 8 + 4

func (st bucketStat) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, st.count)
	b = binary.BigEndian.AppendUint64(b, st.min)
	b = binary.BigEndian.AppendUint64(b, st.max)
	return binary.BigEndian.AppendUint32(b, st.sum)
}

func readStat(b []byte) bucketStat {
	return bucketStat{
		count: binary.BigEndian.Uint64(b),
		min:   binary.BigEndian.Uint64(b[8:]),
		max:   binary.BigEndian.Uint64(b[16:]),
		sum:   binary.BigEndian.Uint32(b[24:]),
	}
}

// stat returns the stat of which (eventsBucket or snapshotsBucket).
func (sm *summary) stat(kind durability.RecordKind) *bucketStat {
	if kind == durability.RecordSnapshot {
		return &sm.snapshots
	}
	return &sm.events
}

// encodeSummary returns the stored form of name's summary.
func encodeSummary(name string, sm summary) []byte {
	body := sm.snapshots.appendTo(sm.events.appendTo(make([]byte, 0, 2*statSize)))
	return sealValue(make([]byte, 0, crcSize+len(body)), summaryKind, name, 0, body)
}

// readSummary returns the summary of the actor bucket ab of name.
func (s *Store) readSummary(ab *bolt.Bucket, name string) (summary, error) {
	if s.legacy {
		return summary{}, nil // a version 2 file read unchecked
	}
	v := ab.Get(summaryKey)
	if len(v) != crcSize+2*statSize || !benchhook.ChecksumsOff.Load() && binary.BigEndian.Uint32(v) != durability.Checksum(summaryKind, name, 0, v[crcSize:]) {
		e := &durability.DamageError{Store: s.path, What: "summary of the actor", Offset: s.fileOffset(v), Reason: "missing or checksum mismatch"}
		if v == nil {
			e.Reason = "missing"
		}
		return summary{}, e
	}
	return summary{events: readStat(v[crcSize:]), snapshots: readStat(v[crcSize+statSize:])}, nil
}

// storedSum returns the checksum a stored value starts with.
func storedSum(v []byte) uint32 {
	if len(v) < crcSize {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

// directory is the summary of the actors bucket.
type directory struct {
	count uint64
	sum   uint32 // sum of durability.Checksum(directoryKind, name, 0, nil)
}

func nameSum(name []byte) uint32 { return durability.Checksum(directoryKind, string(name), 0, nil) }

// readDirectory returns the stored directory summary.
func (s *Store) readDirectory(tx *bolt.Tx) (directory, error) {
	v := tx.Bucket(metaBucket).Get(directoryKey)
	if len(v) != crcSize+12 || !benchhook.ChecksumsOff.Load() && binary.BigEndian.Uint32(v) != durability.Checksum(directoryKind, "", 0, v[crcSize:]) {
		return directory{}, &durability.DamageError{Store: s.path, What: "directory of actors", Offset: s.fileOffset(v), Reason: "missing or checksum mismatch"}
	}
	return directory{count: binary.BigEndian.Uint64(v[crcSize:]), sum: binary.BigEndian.Uint32(v[crcSize+8:])}, nil
}

// writeDirectory stores d.
func writeDirectory(tx *bolt.Tx, d directory) error {
	body := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, d.count), d.sum)
	return tx.Bucket(metaBucket).Put(directoryKey, sealValue(nil, directoryKind, "", 0, body))
}

// scanDirectory walks the actors bucket and returns its summary.
func (s *Store) scanDirectory(tx *bolt.Tx) (directory, error) {
	var d directory
	err := tx.Bucket(actorsBucket).ForEach(func(k, v []byte) error {
		if v != nil {
			return &durability.DamageError{Store: s.path, What: "actors bucket", Offset: s.fileOffset(v), Reason: "a value under " + quote.Name(string(k), "key") + " where an actor bucket belongs"}
		}
		d.count++
		d.sum += nameSum(k)
		return nil
	})
	return d, err
}

// checkDirectory compares the actors bucket with its stored summary: an
// actor bucket lost or renamed by damage is found here, at Open.
func (s *Store) checkDirectory(tx *bolt.Tx) error {
	want, err := s.readDirectory(tx)
	if err != nil {
		return err
	}
	got, err := s.scanDirectory(tx)
	if err != nil {
		return err
	}
	if got != want {
		return &durability.DamageError{Store: s.path, What: "actors bucket", Offset: -1,
			Reason: fmt.Sprintf("holds %d actors (name checksum sum %#x), its summary says %d (%#x): actors lost or renamed", got.count, got.sum, want.count, want.sum)}
	}
	return nil
}

// walkCheck accumulates what a read walked of one bucket, to compare with
// the bucket's stat when the walk covered the whole bucket.
type walkCheck struct {
	first bool // the walk started at or before the bucket's first entry
	count uint64
	sum   uint32
}

// indexCheck compares the indexes a walk of part of a bucket meets,
// which the summary's count and sum cannot check, with what the summary
// says of them: every index lies in [min, max]; a walk that starts at or
// below min meets min first; in a bucket that holds every index of [min,
// max] (events as persistence writes them) it meets them one after
// another; and a walk that reaches the bucket's end meets max last. A
// broken pointer that leads to a page freed since is found when the old
// records it holds break one of these (records deleted since, or a leaf
// that ends before the bucket does), not when it holds an older value
// of a record written again at the same index within the walk.
type indexCheck struct {
	st    bucketStat
	dense bool   // the bucket holds every index of [st.min, st.max]
	exact bool   // the next index met must be next
	next  uint64 // see exact
	seen  bool   // the walk met an index
	last  uint64 // the last index met
}

// newIndexCheck starts the check of a walk of a bucket whose stat is st
// from index start on.
func newIndexCheck(st bucketStat, start uint64) indexCheck {
	c := indexCheck{st: st, dense: st.count > 0 && st.max-st.min == st.count-1}
	switch {
	case start <= st.min:
		c.next, c.exact = st.min, true
	case c.dense:
		c.next, c.exact = start, true
	}
	return c
}

// meet reports whether index i may be the next one the walk meets.
func (c *indexCheck) meet(i uint64) bool {
	ok := c.st.count > 0 && i >= c.st.min && i <= c.st.max && (!c.exact || i == c.next)
	c.seen, c.last = true, i
	c.next, c.exact = i+1, c.dense
	return ok
}

// atEnd reports whether a walk from start that reached the bucket's end
// met what the summary says it must.
func (c *indexCheck) atEnd(start uint64) bool {
	if c.seen {
		return c.last == c.st.max
	}
	return c.st.count == 0 || start > c.st.max
}

// misplaced returns the error for a walk of part of a bucket of kind
// that failed c: at index i (the last it met, if any).
func (s *Store) misplaced(kind durability.RecordKind, c *indexCheck, i uint64, at []byte) error {
	met := "no " + kind.String()
	if c.seen {
		met = fmt.Sprintf("%s %d", kind, i)
	}
	return &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: s.fileOffset(at),
		Reason: fmt.Sprintf("a read of part of it meets %s where its summary (%d %ss, %d to %d) has none: records lost to damaged pages, or old ones read from a page freed since", met, c.st.count, kind, c.st.min, c.st.max)}
}

// verify compares a walk that covered the whole bucket with st.
func (s *Store) verifyWalk(kind durability.RecordKind, w walkCheck, st bucketStat) error {
	if w.count != st.count || w.sum != st.sum {
		return &durability.DamageError{Store: s.path, What: kind.String() + "s bucket", Offset: -1,
			Reason: fmt.Sprintf("holds %d %ss, its summary says %d (or their checksums differ): records lost to damaged pages", w.count, kind, st.count)}
	}
	return nil
}
