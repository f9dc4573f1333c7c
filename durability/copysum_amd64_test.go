//go:build !purego

package durability

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

// TestCopySumChecksum_WithoutSSE42 runs CopySum's path for a CPU without SSE4.2
// (copy, then crc32.Update) where the machine has it, and checks it
// against Checksum and the fast path, for indexes in and out of the
// Summer's 256. Checksum itself is checked against hash/crc32 with and
// without SSE4.2 by TestChecksum_IsCRC32C's cases, run here both ways.
func TestCopySumChecksum_WithoutSSE42(t *testing.T) {
	src := make([]byte, 200)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	for _, fast := range []bool{true, false} {
		func() {
			defer func(had bool) { haveSSE42 = had }(haveSSE42)
			haveSSE42 = fast && haveSSE42
			s := NewSummer(RecordEvent, "router")
			for _, index := range []uint64{0, 5, 255, 256, 1 << 40, 3} {
				for _, n := range []int{0, 1, 31, 32, 100, 200} {
					dst := make([]byte, n)
					sum := s.CopySum(index, dst, src[:n])
					if want := Checksum(RecordEvent, "router", index, src[:n]); sum != want {
						t.Fatalf("SSE4.2 %v: CopySum(%d, %d bytes) = %#x, Checksum = %#x", haveSSE42, index, n, sum, want)
					}
					if !bytes.Equal(dst, src[:n]) {
						t.Fatalf("SSE4.2 %v: CopySum(%d, %d bytes) copied %x", haveSSE42, index, n, dst)
					}
				}
			}
			for _, name := range []string{"", "a", "stream-001", "sixteen-byte-nam", strings.Repeat("n", 200)} {
				for _, n := range []int{0, 7, 100, bulkSize - 1, bulkSize, 3000, fusedFrom - 1, fusedFrom, fusedFrom + 77} {
					data := bytes.Repeat([]byte{byte(n)}, n)
					key := []byte{byte(RecordSnapshot)}
					key = binary.AppendUvarint(key, uint64(len(name)))
					key = binary.BigEndian.AppendUint64(key, 1<<33+7)
					key = append(key, name...)
					want := crc32.Checksum(append(key, data...), crc32.MakeTable(crc32.Castagnoli))
					if got := Checksum(RecordSnapshot, name, 1<<33+7, data); got != want {
						t.Fatalf("SSE4.2 %v: Checksum(%.10q, %d bytes) = %#x, CRC-32C %#x", haveSSE42, name, n, got, want)
					}
					if got, want := CRC32C(data), crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)); got != want {
						t.Fatalf("SSE4.2 %v: CRC32C(%d bytes) = %#x, crc32 %#x", haveSSE42, n, got, want)
					}
					if got, want := keyRegister(RecordEvent, name, uint64(n)), keyRegisterTables(RecordEvent, name, uint64(n)); got != want {
						t.Fatalf("SSE4.2 %v: keyRegister(%.10q) = %#x, by the tables %#x", haveSSE42, name, got, want)
					}
				}
			}
		}()
	}
}

// TestCopySum_ThreeStreams checks CopySum against Checksum and the copy
// against its data for every length from just below threeFrom to
// bulkSize, at every alignment within a word, with three streams and
// with one (haveCLMUL off), where the CPU has PCLMULQDQ: the three streams' split (m = 8*(n/24)), the
// constants that join them (crcShift) and the rest after them.
func TestCopySum_ThreeStreams(t *testing.T) {
	src := make([]byte, bulkSize+8)
	for i := range src {
		src[i] = byte(i*131 + i>>8 + 5)
	}
	dst := make([]byte, bulkSize+8)
	for _, three := range []bool{true, false} {
		func() {
			defer func(had bool) { haveCLMUL = had }(haveCLMUL)
			haveCLMUL = three && haveCLMUL // on a CPU without it, both runs take one stream
			s := NewSummer(RecordEvent, "stream-007")
			for n := threeFrom - 9; n <= bulkSize; n++ {
				for align := range 8 {
					data := src[align : align+n]
					for i := range dst {
						dst[i] = 0xee
					}
					index := uint64(n*8 + align)
					sum := s.CopySum(index, dst, data)
					if want := Checksum(RecordEvent, "stream-007", index, data); sum != want {
						t.Fatalf("three streams %v: CopySum(%d bytes at +%d) = %#x, Checksum = %#x", three, n, align, sum, want)
					}
					if !bytes.Equal(dst[:n], data) {
						t.Fatalf("three streams %v: CopySum(%d bytes at +%d) copied %x", three, n, align, dst[:n])
					}
					if len(bytes.Trim(dst[n:], "\xee")) != 0 {
						t.Fatalf("three streams %v: CopySum(%d bytes at +%d) wrote past the copy", three, n, align)
					}
				}
			}
		}()
	}
}

// TestCRCShift checks crcShift against its definition: the CRC32
// instruction's register r moved past 8k zero bytes, computed by
// hash/crc32, equals the register hashed from 0 over the carry-less
// product of r and crcShift[k] (computed here bit by bit).
func TestCRCShift(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	raw := func(c uint32, p []byte) uint32 { return ^crc32.Update(^c, tab, p) }
	for k := 1; k < len(crcShift); k++ {
		for _, r := range []uint32{1, 0x80000000, 0x12345678, 0xffffffff} {
			var prod uint64
			for i := range 32 {
				if crcShift[k]>>i&1 != 0 {
					prod ^= uint64(r) << i
				}
			}
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], prod)
			if got, want := raw(0, w[:]), raw(r, make([]byte, 8*k)); got != want {
				t.Fatalf("crcShift[%d] moves %#x to %#x, want %#x", k, r, got, want)
			}
		}
	}
}

// BenchmarkCopySum_Streams is CopySum of records around threeFrom and up
// to bulkSize with one stream and with three (haveCLMUL): "chained" makes
// each record's index depend on the last one's checksum, so that a
// record's chain of CRC32 instructions waits for the last one's, as a
// store's read, with a cursor step and an allocation between records,
// partly does.
func BenchmarkCopySum_Streams(b *testing.B) {
	for _, n := range []int{100, 256, 400, 1000} {
		src := make([]byte, n)
		dst := make([]byte, n)
		for _, three := range []bool{false, true} {
			for _, chained := range []bool{false, true} {
				b.Run(fmt.Sprintf("n=%d/three=%v/chained=%v", n, three, chained), func(b *testing.B) {
					defer func(had bool) { haveCLMUL = had }(haveCLMUL)
					haveCLMUL = three && haveCLMUL
					s := NewSummer(RecordEvent, "router")
					b.SetBytes(int64(n))
					var sum uint32
					for i := uint64(0); b.Loop(); i++ {
						index := i & 0xff
						if chained {
							index ^= uint64(sum & 1)
						}
						sum = s.CopySum(index, dst, src)
					}
				})
			}
		}
	}
}
