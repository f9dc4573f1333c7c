package resilience_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polyweave/polyweave-go/models/anthropic/anthropictest"
	"github.com/polyweave/polyweave-go/models/resilience"
)

// TestTransport_HugeRetryAfterIsNotRetried: a Retry-After longer than
// MaxDelay is not waited for: the response is returned as it is. That
// holds for every such value, including ones whose nanoseconds do not fit
// in a time.Duration (an hour is refused; so must be a century).
func TestTransport_HugeRetryAfterIsNotRetried(t *testing.T) {
	for _, after := range []string{"3600", "99999999999", "1e300", "Inf", "Fri, 31 Dec 9999 23:59:59 GMT"} {
		t.Run(after, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSetup(t, resilience.Options{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}, func(n int, w http.ResponseWriter) {
					w.Header().Set("Retry-After", after)
					anthropictest.WriteError(w, http.StatusTooManyRequests, "rate_limit_error", "come back much later")
				})
				r, _ := s.ask(t, "s1")
				if !r.Failed {
					t.Fatalf("answer %+v, want the 429 as an ERROR", r)
				}
				if n := s.served.Load(); n != 1 || len(s.delays) != 0 {
					t.Fatalf("Retry-After %q: server got %d requests after waits %v; want 1 request and no wait (longer than MaxDelay)", after, n, s.delays)
				}
			})
		})
	}
}
