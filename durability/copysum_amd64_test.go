//go:build !purego

package durability

import (
	"bytes"
	"encoding/binary"
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
