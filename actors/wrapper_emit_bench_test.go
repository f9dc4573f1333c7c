package actors

import (
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// BenchmarkWrapper_ToOuter measures what a wrapper pays the runtime to
// pass a frame out, the model's text token after token on a stream it
// keeps open: the shell's checks and bookkeeping, without the send.
func BenchmarkWrapper_ToOuter(b *testing.B) {
	l := &WrapperLogic{c: &shell{}}
	f := messages.Text("s", "token")
	b.ReportAllocs()
	for b.Loop() {
		l.ToOuter(f)
	}
}

// BenchmarkWrapper_ToOuterPassed is BenchmarkWrapper_ToOuter for a
// wrapper that asks whether the frame went out.
func BenchmarkWrapper_ToOuterPassed(b *testing.B) {
	l := &WrapperLogic{c: &shell{}}
	f := messages.Text("s", "token")
	b.ReportAllocs()
	for b.Loop() {
		if !l.ToOuterPassed(f) {
			b.Fatal("the frame did not go out")
		}
	}
}
