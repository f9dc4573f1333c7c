//go:build !purego

package durability

import (
	"encoding/binary"
	"hash/crc32"
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

// haveCLMUL says whether copySum hashes src of threeFrom bytes up to
// bulkSize as three streams, which it joins with the PCLMULQDQ
// instruction; a variable so that a test can run the one-stream path.
var haveCLMUL = cpu.X86.HasPCLMULQDQ

// threeFrom is the size from which copySum hashes src as three streams
// of m = 8*(n/24) bytes each. Below it, joining the streams (a carry-less
// multiplication and the moves to and from its registers) and the
// three streams' separate 8-byte copies cost more than the shorter
// chains save: in BenchmarkCopySum_Streams (AMD EPYC), for 100 bytes
// three streams took 0.85x one's time with each record waiting on the
// last one's checksum but 1.4x without, and in figure 4's read of
// 10 000 100-byte events about 1.01x; from 256 bytes they take 0.6-1.0x,
// and at 1000 bytes 0.4-0.5x, either way.
const threeFrom = 256

// crcShift[k] is the constant whose carry-less product with a CRC-32C
// register r (not inverted), hashed as one 8-byte word by the CRC32
// instruction from 0, is r moved past 8k zero bytes: x^(64k-33) mod P,
// bit-reflected as the instruction keeps its register. copySum's three
// streams look up k up to 2*(bulkSize/24), the first stream moved past
// the other two.
var crcShift = func() (t [2*(bulkSize/24) + 1]uint64) {
	v := xPow(1<<31, 31) // x^31, for k = 1
	for k := 1; k < len(t); k++ {
		t[k] = uint64(v)
		v = xPow(v, 64)
	}
	return t
}()

// xPow returns v times x^e modulo the Castagnoli polynomial, v and the
// result bit-reflected (x^0 is the top bit).
func xPow(v uint32, e int) uint32 {
	for ; e > 0; e-- {
		v = v>>1 ^ crc32.Castagnoli&-(v&1)
	}
	return v
}

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
