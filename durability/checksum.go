package durability

import (
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
// It does not allocate and reads name and data in place; the name and
// the data go through crc32.Update's hardware path.
func Checksum(kind RecordKind, name string, index uint64, data []byte) uint32 {
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
	} else {
		// crc32 only reads the bytes: hashing the string's own bytes
		// spares a copy.
		c = ^crc32.Update(^c, castagnoli, unsafe.Slice(unsafe.StringData(name), len(name)))
	}
	return crc32.Update(^c, castagnoli, data)
}
