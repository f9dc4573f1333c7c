package anthropic_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/polyweave/polyweave-go/models/anthropic"
	"github.com/polyweave/polyweave-go/models/modeltest"
)

// A 200 that is not an event stream (a proxy's sign-in page, a gateway's
// JSON error) is reported as what it is, with the start of the body, not
// as a stream cut off: the server's message would be lost.
func TestAdapter_NotAnEventStream(t *testing.T) {
	rg := newRig(t, anthropic.Options{MaxRetries: anthropic.NoRetries}, modeltest.SignInPage())
	modeltest.WantNotEventStream(t, rg.Ask("s1", userAsk), anthropic.ErrNotEventStream, anthropic.ErrIncomplete)
}

// The event-stream media type with parameters is an event stream.
func TestAdapter_EventStreamWithParameters(t *testing.T) {
	body := sse(messageStart(10, 0, 0), messageDelta("end_turn", 5), messageStop)
	rg := newRig(t, anthropic.Options{}, func(_ int, w http.ResponseWriter, _ *http.Request, _ map[string]json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, body)
	})
	if r := rg.Ask("s1", userAsk); r.Failed {
		t.Fatalf("failed with %q", r.Error)
	}
}
