package resilience_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/models/resilience"
)

// failingOnce fails the first attempt with an error quoting what the
// request carried (as a proxy refusing a tunnel quotes what it was
// sent), then answers 200.
type failingOnce struct{ n atomic.Int32 }

func (f *failingOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.n.Add(1) == 1 {
		return nil, fmt.Errorf("refused %s for %s at %s", r.Header.Get("Authorization"), r.URL.User, r.URL.RawQuery)
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// TestTransport_OnEventHasTheRequestsCredentialsCutOut: the Error of a
// retry event handed to Options.OnEvent (which a host logs) has the
// credentials of the request cut out: its Authorization past the scheme,
// the user info of its URL, its query string; and what the context's
// redaction (an adapter's, WithRedaction) cuts out too.
func TestTransport_OnEventHasTheRequestsCredentialsCutOut(t *testing.T) {
	const (
		token    = "bearer-token-0123456789"
		password = "url-password-0123456789"
		query    = "key=query-key-0123456789"
		other    = "what-the-adapter-knows-0123"
	)
	var events []resilience.Event
	tr, err := resilience.New(&failingOnce{}, &resilience.Options{
		OnEvent: func(ev resilience.Event) { events = append(events, ev) },
		Sleep:   func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := resilience.WithRedaction(context.Background(), func(s string) string { return strings.ReplaceAll(s, other, "[redacted]") })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://user:"+password+"@api.example.com/v1?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token+" "+other)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if len(events) != 1 || events[0].Kind != "retry" {
		t.Fatalf("events %+v; want one retry", events)
	}
	text := events[0].Error
	for _, s := range []string{token, password, "query-key-0123456789", other} {
		if strings.Contains(text, s) {
			t.Errorf("OnEvent's Error %q shows %q", text, s)
		}
	}
	if !strings.HasPrefix(text, "refused Bearer ") {
		t.Errorf("OnEvent's Error %q; want the transport's error, its credentials cut out", text)
	}
}
