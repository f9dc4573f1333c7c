package durability

import (
	"fmt"
	"hash/crc32"
	"unsafe"
)

// RecordKind says what a stored record is, for [Checksum]: the same bytes
// stored as an event and as a snapshot have different checksums, so a
// record read back in the wrong place fails its check.
type RecordKind byte

// Record kinds.
const (
	RecordEvent    RecordKind = 1 // an event of an actor, at its index
	RecordSnapshot RecordKind = 2 // a snapshot of an actor, at its index
	RecordLog      RecordKind = 3 // a store's own log entry, at its sequence number
)

// String returns the kind's name as error messages use it.
func (k RecordKind) String() string {
	switch k {
	case RecordEvent:
		return "event"
	case RecordSnapshot:
		return "snapshot"
	case RecordLog:
		return "log entry"
	default:
		return "record"
	}
}

// castagnoli is hash/crc32's Castagnoli table, made once: crc32.Update
// runs the SSE4.2 (or ARM64 CRC32) instruction for exactly this table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// slicing8 extends castagnoli to 8 bytes a step (slicing-by-8), for the
// index in a record's key: hashing it with crc32.Update would need a
// buffer, and crc32 calls its instruction through a function value, so
// the buffer would move to the heap.
var slicing8 = func() (t [8][256]uint32) {
	t[0] = *castagnoli
	for i := range 256 {
		c := t[0][i]
		for j := 1; j < 8; j++ {
			c = t[0][c&0xff] ^ c>>8
			t[j][i] = c
		}
	}
	return t
}()

// shortName is the longest name hashed byte by byte: for a few bytes
// that is cheaper than a call into crc32's instruction path.
const shortName = 16

// Checksum returns the CRC-32C (Castagnoli) a store keeps with a record:
// over its kind (1 byte), its key (the actor name's length as a uvarint,
// the index as 8 bytes big-endian, the name) and its data. A
// store writes it with the record and checks it on every read, so that a
// record damaged on disk or in memory, or found under another key, is
// reported (as [ErrDamaged]) instead of returned.
//
// It does not allocate and reads name and data in place. Where the CPU
// has a CRC-32C instruction, key and data go through it in a few calls
// of this package's own (copysum_amd64.s), and data of bulkSize bytes or
// more through crc32.Update, which hashes three streams at once.
func Checksum(kind RecordKind, name string, index uint64, data []byte) uint32 {
	if len(data) >= bulkSize {
		return crc32.Update(^keyRegister(kind, name, index), castagnoli, data)
	}
	return ^update(keyRegister(kind, name, index), data)
}

// CRC32C returns the CRC-32C (Castagnoli) of p, as crc32.Checksum with
// the Castagnoli table does, for a store's own framing (a record
// header's checksum, say): short p goes straight to the CRC32
// instruction where the CPU has one, without crc32's dispatch.
func CRC32C(p []byte) uint32 {
	if len(p) >= bulkSize {
		return crc32.Checksum(p, castagnoli)
	}
	return ^update(^uint32(0), p)
}

// bulkSize is the size from which Checksum hashes data with crc32.Update.
const bulkSize = 1024

// updateSlow is update through crc32.Update.
func updateSlow(crc uint32, p []byte) uint32 {
	return ^crc32.Update(^crc, castagnoli, p)
}

// keyRegisterTables is keyRegister without the CRC32 instruction, and
// without a buffer (which crc32.Update would move to the heap): the kind
// and length byte by byte, the index in one slicing-by-8 step, a short
// name byte by byte.
func keyRegisterTables(kind RecordKind, name string, index uint64) uint32 {
	c := ^uint32(0)
	c = castagnoli[byte(c)^byte(kind)] ^ c>>8
	for n := uint64(len(name)); ; n >>= 7 { // the name's length as a uvarint
		b := byte(n & 0x7f)
		if n >= 0x80 {
			b |= 0x80
		}
		c = castagnoli[byte(c)^b] ^ c>>8
		if n < 0x80 {
			break
		}
	}
	// The index, big-endian, 8 bytes in one slicing-by-8 step.
	lo := c ^ uint32(index>>56) ^ uint32(index>>48&0xff)<<8 ^ uint32(index>>40&0xff)<<16 ^ uint32(index>>32&0xff)<<24
	c = slicing8[0][byte(index)] ^ slicing8[1][byte(index>>8)] ^ slicing8[2][byte(index>>16)] ^ slicing8[3][byte(index>>24)] ^
		slicing8[4][lo>>24] ^ slicing8[5][lo>>16&0xff] ^ slicing8[6][lo>>8&0xff] ^ slicing8[7][lo&0xff]
	if len(name) <= shortName {
		for i := 0; i < len(name); i++ {
			c = castagnoli[byte(c)^name[i]] ^ c>>8
		}
		return c
	}
	// crc32 only reads the bytes: hashing the string's own bytes
	// spares a copy.
	return ^crc32.Update(^c, castagnoli, unsafe.Slice(unsafe.StringData(name), len(name)))
}

// A Summer computes [Checksum] for many records of one kind and actor
// name, as a read or a replay of an actor's records does, at about the
// cost of hashing their data alone. Hashing the key byte by byte is a
// chain of dependent table lookups that costs about as much as hashing a
// 100-byte event's data with the CRC32 instruction; but the register
// after a record's key depends on the index's bits linearly (CRC is linear
// over GF(2)), so a Summer keeps the register for the index with its low
// byte zeroed and a table of what each value of the low byte adds: for
// indexes in order, one lookup per record and one full key hash per 256.
//
// The zero value is not usable; a Summer is not safe for concurrent use.
type Summer struct {
	kind RecordKind
	name string
	high uint64      // index>>8 of the last index summed
	reg  uint32      // keyRegister(kind, name, high<<8)
	low  [256]uint32 // low[b]: keyRegister(.., b) ^ keyRegister(.., 0)
}

// NewSummer returns a Summer for records of kind under name.
func NewSummer(kind RecordKind, name string) *Summer {
	s := &Summer{}
	s.Reset(kind, name)
	return s
}

// Reset makes s a Summer for records of kind under name.
func (s *Summer) Reset(kind RecordKind, name string) {
	s.kind, s.name, s.high = kind, name, 0
	s.reg = keyRegister(kind, name, 0)
	s.low[0] = 0
	for j := range 8 {
		bit := keyRegister(kind, name, 1<<j) ^ s.reg
		for x := 1 << j; x < 2<<j; x++ {
			s.low[x] = s.low[x^1<<j] ^ bit
		}
	}
}

// Sum returns Checksum(kind, name, index, data) for s's kind and name.
func (s *Summer) Sum(index uint64, data []byte) uint32 {
	if index>>8 != s.high {
		s.high, s.reg = index>>8, keyRegister(s.kind, s.name, index&^0xff)
	}
	if len(data) >= bulkSize {
		return crc32.Update(^(s.reg ^ s.low[byte(index)]), castagnoli, data)
	}
	return ^update(s.reg^s.low[byte(index)], data)
}

// CopySum copies src into dst and returns Sum(index, src), the checksum
// computed as the bytes are copied: where the CPU has a CRC-32C
// instruction (amd64), each word of src is read once, for the copy and
// the checksum together, instead of once by a copy and again by a check
// of it. dst must be at least as long as src (CopySum panics otherwise);
// the caller allocates it, so that a store's read makes the same
// allocation with checks as without. A store that returns copies of its
// records checks them with it: what is returned is what was checked.
func (s *Summer) CopySum(index uint64, dst, src []byte) uint32 {
	// One call, so that it inlines: a store's read calls the copy
	// routine directly, once a record.
	return copySum(s, index, dst, src)
}

// copySumSlow is CopySum for an index outside the 256 s has its register
// for, a dst shorter than src (a panic), a CPU without SSE4.2, or src of
// bulkSize bytes or more but less than fusedFrom: in cache, a copy and
// then crc32's three streams at once beat the one stream of the fused
// loop.
func copySumSlow(s *Summer, index uint64, dst, src []byte) uint32 {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("durability: CopySum of %d bytes into %d", len(src), len(dst)))
	}
	if n := len(src); n >= bulkSize && n < fusedFrom {
		copy(dst, src)
		return s.Sum(index, dst[:n])
	}
	if index>>8 != s.high {
		s.high, s.reg = index>>8, keyRegister(s.kind, s.name, index&^0xff)
	}
	if haveSSE42 {
		return copySum(s, index, dst, src)
	}
	copy(dst, src)
	return crc32.Update(^(s.reg ^ s.low[byte(index)]), castagnoli, dst[:len(src)])
}

// fusedFrom is the size from which CopySum copies and checksums in one
// pass again: once src and dst no longer fit in a core's cache, reading
// src once matters more than hashing three streams at once
// (BenchmarkSummer_CopySum, AMD EPYC: at 256 KiB copy-then-sum takes
// 0.58× the fused loop's time, at 1 MiB 1.9×; below bulkSize the fused
// loop takes half the time).
const fusedFrom = 512 << 10
