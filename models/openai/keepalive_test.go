package openai_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/openai"
)

// A server that keeps the stream alive with SSE comments while the model
// thinks (OpenRouter's ": OPENROUTER PROCESSING") is not stalled: the
// idle bound counts any bytes, not only events.
func TestAdapter_KeepAliveCommentsAreNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Second
		rg := modeltest.NewMemRig(t, modeltest.KeepAlive(content("Thinking"), ": OPENROUTER PROCESSING\n\n", sse(content(" done."), finish("stop"), done), idle/20, 2*idle),
			adapter(t, openai.Options{IdleTimeout: idle, MaxRetries: openai.NoRetries}))
		if r := rg.Ask("s1", userAsk); r.Failed || r.Text != "Thinking done." {
			t.Fatalf("failed %v with %q, text %q: want the whole answer", r.Failed, r.Error, r.Text)
		}
	})
}

// A server that keeps the stream alive for ever without an answer does
// not hold the request for ever: keep-alive bytes restart the idle
// bound, not the bound of the whole answer.
func TestAdapter_EndlessKeepAliveMeetsTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 500 * time.Millisecond
		rg := modeltest.NewMemRig(t, modeltest.KeepAlive(content("Thinking"), ":\n\n", "", idle/10, 0),
			adapter(t, openai.Options{Timeout: 3 * idle, IdleTimeout: idle, MaxRetries: openai.NoRetries}))
		r := rg.Ask("s1", userAsk)
		if !r.Failed || !containsAll(r.Error, "no complete answer within 1.5s") || r.Text != "Thinking" {
			t.Fatalf("failed %v with %q, text %q: want the total bound's error after the text", r.Failed, r.Error, r.Text)
		}
	})
}
