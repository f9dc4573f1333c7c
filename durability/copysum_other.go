//go:build !amd64 || purego

package durability

// haveSSE42 is false: CopySum copies, then hashes the copy with
// crc32.Update (which runs the CPU's CRC-32C instruction where Go knows
// one).
const haveSSE42 = false

// copyCastagnoliSSE42 is not called where haveSSE42 is false.
func copyCastagnoliSSE42(crc uint32, dst, src []byte) uint32 {
	panic("durability: copyCastagnoliSSE42 without SSE4.2")
}
