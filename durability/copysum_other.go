//go:build !amd64 || purego

package durability

// haveSSE42 is false: CopySum copies, then hashes the copy with
// crc32.Update (which runs the CPU's CRC-32C instruction where Go knows
// one).
const haveSSE42 = false

// copySum is [Summer.CopySum].
func copySum(s *Summer, index uint64, dst, src []byte) uint32 {
	return copySumSlow(s, index, dst, src)
}
