package main

import "testing"

// BenchmarkArgumentAccumulation streams 64 KiB, 1 MiB and 8 MiB arguments
// in 64-byte chunks through tools.Assembler ("assembler") against a
// strings.Builder and json.Unmarshal of the same bytes ("builder").
func BenchmarkArgumentAccumulation(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		st := newArgStream(size)
		b.Run(sizeName(size)+"/builder", st.benchBuilder)
		b.Run(sizeName(size)+"/assembler", st.benchAssemble)
	}
}
