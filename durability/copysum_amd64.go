//go:build !purego

package durability

import "golang.org/x/sys/cpu"

// copySum is [Summer.CopySum], in one pass over src where it can
// (copysum_amd64.s), else through copySumSlow.
//
//go:noescape
func copySum(s *Summer, index uint64, dst, src []byte) uint32

// haveSSE42 says whether copySum copies and hashes in one pass; a
// variable so that a test can run the path without SSE4.2.
var haveSSE42 = cpu.X86.HasSSE42
