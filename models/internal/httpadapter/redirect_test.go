package httpadapter_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/models/internal/httpadapter"
)

// credentialHeaders are headers an adapter's request may carry a key in
// (RequestOptions add them), which Go's client keeps on a redirect to
// another host, and Authorization, which it keeps on one to a subdomain.
var credentialHeaders = map[string]string{
	"X-Api-Key":      "x-api-key-secret-0123456789",
	"Api-Key":        "api-key-secret-0123456789",
	"X-Goog-Api-Key": "goog-secret-0123456789",
	"Authorization":  "Bearer bearer-secret-0123456789",
}

// TestHTTPClient_RedirectToAnotherOriginDropsCredentials: a request the
// endpoint's client sends (its own client, or one the Config gave)
// redirected to another origin reaches it without the headers that carry
// credentials; redirected on its own origin, it keeps them.
func TestHTTPClient_RedirectToAnotherOriginDropsCredentials(t *testing.T) {
	got := make(chan http.Header, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/v1", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/v1", http.StatusPermanentRedirect)
		default:
			got <- r.Header.Clone()
		}
	}))
	defer first.Close()
	for _, given := range []bool{false, true} {
		for _, path := range []string{"/away", "/here"} {
			t.Run(fmt.Sprint("client given=", given, path), func(t *testing.T) {
				var cfg httpadapter.Config
				if given {
					cfg.HTTPClient = &http.Client{}
				}
				e := httpadapter.Open(cfg)
				defer e.Close()
				req, err := http.NewRequest(http.MethodPost, first.URL+path, strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				for name, value := range credentialHeaders {
					req.Header.Set(name, value)
				}
				res, err := e.HTTPClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = res.Body.Close()
				h := <-got
				for name, value := range credentialHeaders {
					switch sent := h.Get(name); {
					case path == "/away" && sent != "":
						t.Errorf("%s: %q reached the other origin", name, sent)
					case path == "/here" && sent != value:
						t.Errorf("%s: %q on the same origin, want %q", name, sent, value)
					}
				}
			})
		}
	}
}
