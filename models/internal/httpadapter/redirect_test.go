package httpadapter_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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

// TestHTTPClient_SameOriginRedirectUnderATransportThatDoesNotSayTheRequest:
// a redirect to a relative Location on the request's origin is followed,
// and the answer's context goes on, under a transport whose responses do
// not point back to their request (Response.Request, which a
// RoundTripper need not set): http.Client reads the Location against the
// URL it sent, and so must the check of its origin, not take it for
// another origin that ends the answer.
func TestHTTPClient_SameOriginRedirectUnderATransportThatDoesNotSayTheRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/here" {
			w.Header().Set("Location", "/v1")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	res, ctx, err := postWithoutRequest(t, srv, "/here")
	if err != nil {
		t.Fatalf("the redirect on the request's origin was not followed: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "ok" || err != nil {
		t.Errorf("HTTP %d with %q (%v); want 200 from /v1", res.StatusCode, body, err)
	}
	if err := context.Cause(ctx); err != nil {
		t.Errorf("the answer's context ended: %v", err)
	}
}

// postWithoutRequest POSTs to path on srv with the client of an endpoint
// on srv's client under [withoutRequest], in the context of an answer's
// bounds, which it returns with the result; t's cleanup releases them.
func postWithoutRequest(t *testing.T, srv *httptest.Server, path string) (*http.Response, context.Context, error) {
	t.Helper()
	client := srv.Client()
	t.Cleanup(client.CloseIdleConnections)
	e := httpadapter.Open(httpadapter.Config{HTTPClient: &http.Client{Transport: withoutRequest{client.Transport}}})
	t.Cleanup(e.Close)
	b, ctx := e.Bound(context.Background())
	t.Cleanup(b.Release)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.HTTPClient().Do(req)
	return res, ctx, err
}

// withoutRequest is a transport whose responses do not say their request.
type withoutRequest struct{ next http.RoundTripper }

func (w withoutRequest) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := w.next.RoundTrip(r)
	if res != nil {
		res.Request = nil
	}
	return res, err
}

// TestHTTPClient_RedirectChainUnderATransportThatDoesNotSayTheRequest:
// under a transport whose responses do not point back to their request,
// the origin of a chain's first request cannot be found from a later
// one; a redirect the endpoint's client followed stays on that origin,
// though, so a later request's is the same, and the rules hold all along
// the chain: after a 307 on the origin, a redirect to another origin is
// refused, and so is a 302 or 303 on the origin, which would send the
// POST on as a GET; neither reaches the place it points to, and both end
// the answer.
func TestHTTPClient_RedirectChainUnderATransportThatDoesNotSayTheRequest(t *testing.T) {
	reachedOther := make(chan struct{}, 1)
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reachedOther <- struct{}{} }))
	defer other.Close()
	var mu sync.Mutex
	var got []string
	var then func(w http.ResponseWriter, r *http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		second := then
		mu.Unlock()
		switch r.URL.Path {
		case "/first":
			http.Redirect(w, r, "/second", http.StatusTemporaryRedirect)
		case "/second":
			second(w, r)
		default:
			_, _ = w.Write([]byte("not the model's answer"))
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		name, says string
		then       func(w http.ResponseWriter, r *http.Request)
	}{
		{"away", "to another origin", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/v1", http.StatusTemporaryRedirect)
		}},
		{"302 here", "HTTP 302 Found to " + srv.URL + "/third, which would send it on as a GET", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/third", http.StatusFound)
		}},
		{"303 here", "HTTP 303 See Other to " + srv.URL + "/third, which would send it on as a GET", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/third", http.StatusSeeOther)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			then, got = c.then, nil
			mu.Unlock()
			res, ctx, err := postWithoutRequest(t, srv, "/first")
			if err == nil {
				body, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				t.Fatalf("the redirect was followed: HTTP %d with %q", res.StatusCode, body)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q; want it to say %q", err, c.says)
			}
			if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), c.says) {
				t.Errorf("the answer's context ended with %v; want the refusal", cause)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"POST /first", "POST /second"}; !slices.Equal(got, want) {
				t.Errorf("the server got %q; want %q", got, want)
			}
			select {
			case <-reachedOther:
				t.Error("the other origin was reached")
			default:
			}
		})
	}
}
