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

// update updates crc, a CRC-32C register (not inverted), over p.
func update(crc uint32, p []byte) uint32 { return updateSlow(crc, p) }

// keyRegister returns the CRC-32C register (not inverted) after a
// record's key (see keyRegisterTables).
func keyRegister(kind RecordKind, name string, index uint64) uint32 {
	return keyRegisterTables(kind, name, index)
}
