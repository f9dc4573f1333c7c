//go:build !purego

package durability

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// copySum is [Summer.CopySum], in one pass over src where it can
// (copysum_amd64.s), else through copySumSlow.
//
//go:noescape
func copySum(s *Summer, index uint64, dst, src []byte) uint32

// update updates crc, a CRC-32C register (not inverted), over p with the
// CRC32 instruction (copysum_amd64.s), else through updateSlow.
//
//go:noescape
func update(crc uint32, p []byte) uint32

// haveSSE42 says whether copySum and update run the CRC32 instruction; a
// variable so that a test can run the paths without SSE4.2.
var haveSSE42 = cpu.X86.HasSSE42

// keyRegister returns the CRC-32C register (not inverted) after a
// record's key: its kind, its name's length as a uvarint, its index (8
// bytes big-endian) and its name. The fixed part is laid out in a buffer
// on the stack (update does not keep it) and hashed with the name's own
// bytes by the CRC32 instruction, 8 bytes at a time.
func keyRegister(kind RecordKind, name string, index uint64) uint32 {
	var buf [1 + binary.MaxVarintLen64 + 8]byte
	buf[0] = byte(kind)
	n := 1 + binary.PutUvarint(buf[1:], uint64(len(name)))
	binary.BigEndian.PutUint64(buf[n:], index)
	c := update(^uint32(0), buf[:n+8])
	return update(c, unsafe.Slice(unsafe.StringData(name), len(name)))
}
