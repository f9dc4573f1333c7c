package anthropic_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// A stream kept alive by ping events (while a server tool runs, or
// before a long first token) is not stalled: the idle bound counts any
// bytes, also the events the SDK does not hand over.
func TestAdapter_PingsAreNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Second
		rg := modeltest.NewMemRig(t, modeltest.KeepAlive(sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Thinking")), ping,
			sse(textDelta(0, " done."), blockStop(0), messageDelta("end_turn", 3), messageStop), idle/20, 2*idle),
			adapter(t, anthropic.Options{IdleTimeout: idle}))
		if r := rg.Ask("s1", userAsk); r.Failed || r.Text != "Thinking done." {
			t.Fatalf("failed %v with %q, text %q: want the whole answer", r.Failed, r.Error, r.Text)
		}
	})
}
