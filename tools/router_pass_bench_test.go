package tools

import (
	"testing"

	"github.com/polyweave/polyweave-go/messages"
)

// BenchmarkRouter_PassText: the response path of a router for the frame
// it passes out most, the model's TEXT on a stream the consumer has a
// call open on.
func BenchmarkRouter_PassText(b *testing.B) {
	r := newRouterLogic(nil, BreakerOptions{})
	c := &inlineCtx{}
	r.Request(c, messages.Text("s", "prompt"))
	f := messages.Text("s", "token")
	b.ReportAllocs()
	for b.Loop() {
		r.Response(c, f)
		c.Emitted = c.Emitted[:0]
	}
}
