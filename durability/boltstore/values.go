package boltstore

import (
	"encoding/binary"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/internal/benchhook"
)

// crcSize is the size of the CRC-32C that starts every stored value of a
// version 3 file (big-endian): a bucket value's covers its kind, actor
// name, index and data ([durability.Checksum]); a log value's covers its
// sequence number and the records framed in it.
const crcSize = 4

// sealValue appends the stored form of a record to b: its checksum, then
// its data.
func sealValue(b []byte, kind durability.RecordKind, name string, index uint64, data []byte) []byte {
	var sum uint32
	if !benchhook.ChecksumsOff.Load() {
		sum = durability.Checksum(kind, name, index, data)
	}
	b = binary.BigEndian.AppendUint32(b, sum)
	return append(b, data...)
}

// sealWithSum appends the stored form of a record whose checksum is
// known to b.
func sealWithSum(b []byte, sum uint32, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, sum)
	return append(b, data...)
}

// checker computes the checksums of one actor's records of one kind, as
// a walk over its bucket checks them: the first few with
// [durability.Checksum], then, for a walk long enough to repay making one,
// with a [durability.Summer], which hashes a key with a table lookup
// instead of a chain of them.
type checker struct {
	kind   durability.RecordKind
	name   string
	n      int
	summer *durability.Summer
}

// summerAfter is how many records a checker checks before it makes a
// Summer (whose table costs about as much as hashing a dozen keys).
const summerAfter = 16

// sum returns durability.Checksum(c.kind, c.name, index, data).
func (c *checker) sum(index uint64, data []byte) uint32 {
	if c.summer != nil || c.makeSummer() {
		return c.summer.Sum(index, data)
	}
	return durability.Checksum(c.kind, c.name, index, data)
}

// copySumFirst copies src into dst and returns its checksum, for a
// checker that has no Summer yet (openValue calls the Summer's CopySum
// itself once it has one: one call less a record).
func (c *checker) copySumFirst(index uint64, dst, src []byte) uint32 {
	if c.makeSummer() {
		return c.summer.CopySum(index, dst, src)
	}
	// The copy is checked: what is returned is what passed the check,
	// and the check reads bytes the copy has just brought into the cache.
	copy(dst, src)
	return durability.Checksum(c.kind, c.name, index, dst)
}

// makeSummer counts a record checked without c's Summer and makes the
// Summer once summerAfter were; it says whether c has it now.
func (c *checker) makeSummer() bool {
	if c.n++; c.n <= summerAfter {
		return false
	}
	c.summer = durability.NewSummer(c.kind, c.name)
	return true
}

// openValue checks a bucket value of c's actor and kind read in a
// transaction (v aliases the mapped file) and returns a copy of its data.
// A value that fails its check gives a *durability.DamageError naming the
// record and where it is in the file.
func (s *Store) openValue(c *checker, index uint64, v []byte) ([]byte, error) {
	kind := c.kind
	if s.legacy {
		return append(make([]byte, 0, len(v)), v...), nil
	}
	if v == nil {
		return nil, s.damagedValue(kind, index, v, "a nested bucket where a value belongs")
	}
	if len(v) < crcSize {
		return nil, s.damagedValue(kind, index, v, "shorter than its checksum")
	}
	if benchhook.ChecksumsOff.Load() {
		return append(make([]byte, 0, len(v)-crcSize), v[crcSize:]...), nil
	}
	// The checksum is computed as the data is copied (on the copy, where
	// copy and checksum are two passes): what is returned is what passed
	// the check. The copy is allocated as without checks.
	data := make([]byte, len(v)-crcSize)
	var sum uint32
	if c.summer != nil {
		sum = c.summer.CopySum(index, data, v[crcSize:])
	} else {
		sum = c.copySumFirst(index, data, v[crcSize:])
	}
	if binary.BigEndian.Uint32(v) != sum {
		return nil, s.damagedValue(kind, index, v, "checksum mismatch")
	}
	return data, nil
}

// damagedValue returns the error for a damaged value v of the mapped file.
func (s *Store) damagedValue(kind durability.RecordKind, index uint64, v []byte, reason string) error {
	e := durability.Damaged(s.path, kind, index, reason)
	e.Offset = s.fileOffset(v)
	return e
}

// damagedKey returns the error for a bucket key that is not an index.
func (s *Store) damagedKey(kind durability.RecordKind, k []byte) error {
	e := &durability.DamageError{Store: s.path, What: kind.String() + " key", Offset: s.fileOffset(k), Reason: "not an 8-byte index"}
	return e
}

// fileOffset returns where b, a slice of the mapped file, is in the file,
// or -1 if it is not in the mapping.
func (s *Store) fileOffset(b []byte) int64 {
	if len(b) == 0 {
		return -1
	}
	base := safeBase(s.db)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if base == 0 || p < base {
		return -1
	}
	return int64(p - base)
}

// safeBase returns the address of db's mapping, or 0 if it has none (bbolt
// asserts that it has one).
func safeBase(db *bolt.DB) (base uintptr) {
	defer func() {
		if recover() != nil {
			base = 0
		}
	}()
	if db == nil {
		return 0
	}
	return db.Info().Data
}
