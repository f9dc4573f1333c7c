package openai_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/openai"
)

// A server that keeps the stream alive with SSE comments while the model
// thinks (OpenRouter's ": OPENROUTER PROCESSING") is not stalled: the
// idle bound counts any bytes, not only events.
func TestAdapter_KeepAliveCommentsAreNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Second
		rg := newMemRig(t, openai.Options{IdleTimeout: idle, MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			flush := func(s string) { _, _ = io.WriteString(w, s); w.(http.Flusher).Flush() }
			flush(content("Thinking"))
			tick := time.NewTicker(idle / 20)
			defer tick.Stop()
			for end := time.Now().Add(2 * idle); time.Now().Before(end); {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					flush(": OPENROUTER PROCESSING\n\n")
				}
			}
			flush(sse(content(" done."), finish("stop"), done))
		})
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
		rg := newMemRig(t, openai.Options{Timeout: 3 * idle, IdleTimeout: idle, MaxRetries: openai.NoRetries}, func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			flush := func(s string) { _, _ = io.WriteString(w, s); w.(http.Flusher).Flush() }
			flush(content("Thinking"))
			tick := time.NewTicker(idle / 10)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					flush(":\n\n")
				}
			}
		})
		r := rg.Ask("s1", userAsk)
		if !r.Failed || !containsAll(r.Error, "no complete answer within 1.5s") || r.Text != "Thinking" {
			t.Fatalf("failed %v with %q, text %q: want the total bound's error after the text", r.Failed, r.Error, r.Text)
		}
	})
}
