package durability

import "hash/crc32"

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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) a store keeps with a record:
// over its kind (1 byte), its key (the actor name's length as a uvarint,
// the index as 8 bytes big-endian, the name) and its data. A
// store writes it with the record and checks it on every read, so that a
// record damaged on disk or in memory, or found under another key, is
// reported (as [ErrDamaged]) instead of returned.
func Checksum(kind RecordKind, name string, index uint64, data []byte) uint32 {
	// The key is hashed byte by byte (it is short): handing a local
	// buffer to crc32.Update would move it to the heap.
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
	for shift := 56; shift >= 0; shift -= 8 { // the index, big-endian
		c = castagnoli[byte(c)^byte(index>>shift)] ^ c>>8
	}
	for i := 0; i < len(name); i++ {
		c = castagnoli[byte(c)^name[i]] ^ c>>8
	}
	return crc32.Update(^c, castagnoli, data)
}
