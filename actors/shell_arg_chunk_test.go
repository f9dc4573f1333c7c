package actors

import "testing"

// chunkStreams opens the streams the argument-chunk benchmarks write
// into: two inline, the second carrying two calls, and one past the
// inline room.
func chunkStreams() *openStreams {
	var o openStreams
	for _, id := range []string{"s0", "s1", "s2"} {
		o.add(id)
		o.noteCall(id, "c1")
	}
	o.noteCall("s1", "c2")
	return &o
}

// BenchmarkOpenStreams_ArgChunks measures the shell's bookkeeping of an
// argument chunk of a streaming call, its hot path: whether the stream
// holds the chunk's call (see continues), then noting the call. Each op
// is one chunk.
func BenchmarkOpenStreams_ArgChunks(b *testing.B) {
	for _, bc := range []struct{ name, id, call string }{
		{"inline", "s0", "c1"},
		{"several", "s1", "c2"},
		{"past-inline", "s2", "c1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := chunkStreams()
			b.ReportAllocs()
			for b.Loop() {
				if !o.continues(bc.id, bc.call) {
					b.Fatalf("chunk of %s on %s not held", bc.call, bc.id)
				}
				o.noteCall(bc.id, bc.call)
			}
		})
	}
}
