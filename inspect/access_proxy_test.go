package inspect_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/inspect"
)

// TestAccess_ProxiedClientIsNotLoopback: a reverse proxy on the same
// machine (nginx's default proxy_pass sets Host to the upstream's
// "127.0.0.1:8080") makes every client look like a loopback one. A
// request that says it was forwarded for another client is that
// client's: refused unless AllowRemote, the page and its fault
// injection (a client without a browser sends neither Origin nor
// Sec-Fetch-Site) alike.
func TestAccess_ProxiedClientIsNotLoopback(t *testing.T) {
	rt := actorstest.NewRuntime(t, nil)
	in, err := inspect.New(rt, &inspect.Options{Faults: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, h := range []struct{ name, value string }{
		{"X-Forwarded-For", "203.0.113.9"},
		{"Forwarded", "for=203.0.113.9;proto=https"},
		// nginx with proxy_set_header X-Forwarded-Proto $scheme alone.
		{"X-Forwarded-Proto", "https"},
	} {
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/api/state", nil),
			httptest.NewRequest(http.MethodPost, "/api/fault/stall", strings.NewReader("tool=echo&on=true")),
		} {
			req.RemoteAddr, req.Host = "127.0.0.1:5000", "127.0.0.1:8080"
			req.Header.Set(h.name, h.value)
			if req.Method == http.MethodPost {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Accept", "application/json")
			}
			w := httptest.NewRecorder()
			in.ServeHTTP(w, req)
			if w.Code != http.StatusForbidden {
				t.Errorf("%s %s forwarded (%s: %s) by a local proxy: %d, want 403", req.Method, req.URL.Path, h.name, h.value, w.Code)
			}
		}
	}
}

// TestAccess_ForwardedProtoServedWithAllowRemote: with AllowRemote, a
// request a proxy ending TLS forwarded, saying only X-Forwarded-Proto,
// is served, and its fault posts from the page's https origin are the
// page's own.
func TestAccess_ForwardedProtoServedWithAllowRemote(t *testing.T) {
	remote := newRemoteFaultInspector(t)
	req := httptest.NewRequest(http.MethodGet, "/api/state", nil)
	req.RemoteAddr, req.Host = "127.0.0.1:5000", "127.0.0.1:8080"
	req.Header.Set("X-Forwarded-Proto", "https")
	w := httptest.NewRecorder()
	remote.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("GET /api/state forwarded (X-Forwarded-Proto: https), AllowRemote: %d %q, want 200", w.Code, w.Body.String())
	}
	h := http.Header{"Origin": {"https://127.0.0.1:8080"}, "X-Forwarded-Proto": {"https"}, "Sec-Fetch-Site": {"same-origin"}}
	if rec := faultPost(remote, "http://127.0.0.1:8080", "/api/fault/stall", "tool=nope&on=true", h); rec.Code != http.StatusNotFound {
		t.Errorf("a fault post forwarded from the page's https origin, AllowRemote: %d %q, want 404 (no such tool)", rec.Code, rec.Body.String())
	}
}
