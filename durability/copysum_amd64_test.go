//go:build !purego

package durability

import (
	"bytes"
	"testing"
)

// TestCopySum_WithoutSSE42 runs CopySum's path for a CPU without SSE4.2
// (copy, then crc32.Update) where the machine has it, and checks it
// against Checksum and the fast path, for indexes in and out of the
// Summer's 256.
func TestCopySum_WithoutSSE42(t *testing.T) {
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
		}()
	}
}
