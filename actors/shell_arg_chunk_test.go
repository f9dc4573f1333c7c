package actors

import (
	"strconv"
	"testing"
)

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

// TestOpenStreams_ArgChunkNoAllocation: telling whether a stream holds
// an argument chunk's call (see continues), and noting it, costs no
// allocation, on a stream inline or past the inline room, of one call
// or several, and on a stream of which the Logic ended a call; and
// gives the answer its rule does.
func TestOpenStreams_ArgChunkNoAllocation(t *testing.T) {
	o := chunkStreams()
	o.endCall("s1", "c1") // s1 now holds c2 alone, the Logic having ended c1
	chunk := func() {
		for _, c := range []struct {
			id, call string
			held     bool
		}{
			{"s0", "c1", true}, {"s0", "", true}, {"s0", "c9", false},
			{"s1", "c2", true}, {"s1", "c1", false},
			{"s2", "c1", true}, {"s2", "c9", false},
			{"nope", "c1", false},
		} {
			if got := o.continues(c.id, c.call); got != c.held {
				t.Fatalf("continues(%s, %s) = %v, want %v", c.id, c.call, got, c.held)
			}
			if c.held {
				o.noteCall(c.id, c.call)
			}
		}
	}
	chunk()
	if n := testing.AllocsPerRun(100, chunk); n != 0 {
		t.Errorf("argument chunks cost %v allocations, want 0", n)
	}
}

// BenchmarkOpenStreams_ArgChunksBesideEnded is BenchmarkOpenStreams_ArgChunks
// on a stream of which the Logic ended endedMax calls by their ids (a
// model's stream, kept open by its text, its calls ended one by one):
// the chunk of the call noted costs what it costs on a stream of no call
// ended, the ended calls not looked through.
func BenchmarkOpenStreams_ArgChunksBesideEnded(b *testing.B) {
	for _, id := range []string{"s", "m"} { // inline, and past the inline room
		b.Run(id, func(b *testing.B) {
			var o openStreams
			if id == "m" {
				o.openCalls("x0")
				o.openCalls("x1")
			}
			o.openCalls(id, "")
			for i := range endedMax {
				c := "call_" + strconv.Itoa(1000+i)
				o.noteCall(id, c)
				o.endCall(id, c)
			}
			const call = "call_9999"
			o.noteCall(id, call)
			b.ReportAllocs()
			for b.Loop() {
				if !o.continues(id, call) {
					b.Fatalf("chunk of %s on %s not held", call, id)
				}
				o.noteCall(id, call)
			}
		})
	}
}
