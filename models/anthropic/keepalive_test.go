package anthropic_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/anthropic"
)

// A stream kept alive by ping events (while a server tool runs, or
// before a long first token) is not stalled: the idle bound counts any
// bytes, also the events the SDK does not hand over.
func TestAdapter_PingsAreNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Second
		rg := newMemRig(t, anthropic.Options{IdleTimeout: idle}, func(_ int, w http.ResponseWriter, r *http.Request, _ map[string]json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			flush := func(s string) { _, _ = io.WriteString(w, s); w.(http.Flusher).Flush() }
			flush(sse(messageStart(10, 0, 0), textStart(0), textDelta(0, "Thinking")))
			tick := time.NewTicker(idle / 20)
			defer tick.Stop()
			for end := time.Now().Add(2 * idle); time.Now().Before(end); {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					flush(ping)
				}
			}
			flush(sse(textDelta(0, " done."), blockStop(0), messageDelta("end_turn", 3), messageStop))
		})
		if r := rg.Ask("s1", userAsk); r.Failed || r.Text != "Thinking done." {
			t.Fatalf("failed %v with %q, text %q: want the whole answer", r.Failed, r.Error, r.Text)
		}
	})
}
