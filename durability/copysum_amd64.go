//go:build !purego

package durability

import "golang.org/x/sys/cpu"

// copyCastagnoliSSE42 copies src into dst and updates crc, a CRC-32C
// register (not inverted), over it, in one pass (copysum_amd64.s).
//
//go:noescape
func copyCastagnoliSSE42(crc uint32, dst, src []byte) uint32

// haveSSE42 says whether CopySum runs copyCastagnoliSSE42.
var haveSSE42 = cpu.X86.HasSSE42
