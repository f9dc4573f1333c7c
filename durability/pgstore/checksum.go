package pgstore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// ErrDamaged is the cause of the *durability.StoreError a read returns
// when a stored row does not match its checksum: the row was changed after
// the store wrote it (by a disk, a restore gone wrong, or a hand in psql).
// The damaged data is never handed out.
var ErrDamaged = errors.New("stored record is damaged: checksum mismatch")

// Row kinds, part of the checksummed bytes so that a row moved between the
// tables does not pass.
const (
	kindEvent    = 'e'
	kindSnapshot = 's'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the CRC-32C of a row's key and value: its kind, the name's
// length (uvarint) and bytes, the index (8 bytes big-endian) and the data.
func checksum(kind byte, name string, index uint64, data []byte) uint32 {
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = kind
	n := 1 + binary.PutUvarint(hdr[1:], uint64(len(name)))
	sum := crc32.Update(0, castagnoli, hdr[:n])
	sum = crc32.Update(sum, castagnoli, []byte(name))
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	sum = crc32.Update(sum, castagnoli, ib[:])
	return crc32.Update(sum, castagnoli, data)
}
