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

// TestHTTPClient_RedirectToAnotherOrigin: a request the endpoint's
// client sends redirected to another origin, with any status, is not
// followed (its body, the prompt, stays with the API's server) when the
// client is the endpoint's own or one the Config gave without a
// CheckRedirect: the error says the method and the status, and names
// neither the place the redirect points to nor its credentials. A client
// given with its own CheckRedirect has it honoured, and the redirect
// reaches the other origin without the headers that carry credentials.
// Redirected on its own origin, a request keeps them.
func TestHTTPClient_RedirectToAnotherOrigin(t *testing.T) {
	got := make(chan http.Header, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer other.Close()
	const user, token = "target-user-0123456789", "target-token-0123456789"
	target := strings.Replace(other.URL, "://", "://"+user+":pw@", 1) + "/v1?token=" + token
	var status int
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, target, status)
		case "/here":
			http.Redirect(w, r, "/v1", http.StatusPermanentRedirect)
		default:
			got <- r.Header.Clone()
		}
	}))
	defer first.Close()
	statuses := []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}
	for _, client := range []string{"own", "given", "given with CheckRedirect"} {
		for _, path := range []string{"/away", "/here"} {
			for _, st := range statuses {
				if path == "/here" && st != http.StatusPermanentRedirect {
					continue
				}
				t.Run(fmt.Sprint(client, path, st), func(t *testing.T) {
					status = st
					var cfg httpadapter.Config
					checked := 0
					switch client {
					case "given":
						cfg.HTTPClient = &http.Client{}
					case "given with CheckRedirect":
						cfg.HTTPClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { checked++; return nil }}
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
					if path == "/away" && client != "given with CheckRedirect" {
						if err == nil {
							_ = res.Body.Close()
							t.Fatalf("the redirect to another origin was followed: the other origin got %v", <-got)
						}
						want := fmt.Sprintf("the server redirected the POST with HTTP %d %s to another origin", st, http.StatusText(st))
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q; want it to say %q", err, want)
						}
						for _, shown := range []string{user, token, strings.TrimPrefix(other.URL, "http://")} {
							if strings.Contains(err.Error(), shown) {
								t.Errorf("error %q names %q of the place the redirect points to", err, shown)
							}
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					_ = res.Body.Close()
					if client == "given with CheckRedirect" && checked != 1 {
						t.Errorf("the client's CheckRedirect was asked %d times; want once", checked)
					}
					h := <-got
					for name, value := range credentialHeaders {
						switch sent := h.Get(name); {
						case path == "/away" && sent == value: // (Authorization may be the basic auth of the user info of the URL redirected to)
							t.Errorf("%s: %q reached the other origin", name, sent)
						case path == "/here" && sent != value:
							t.Errorf("%s: %q on the same origin, want %q", name, sent, value)
						}
					}
				})
			}
		}
	}
}
