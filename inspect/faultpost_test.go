package inspect_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/inspect"
)

// faultPost posts form to the fault endpoint path of in at target's
// target (scheme, host and port) from a loopback client, with header,
// and returns the answer.
func faultPost(in *inspect.Inspector, target, path, form string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, target+path, strings.NewReader(form))
	req.RemoteAddr = "127.0.0.1:5000"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, req)
	return rec
}

// newFaultInspector is an inspector with Faults on, closed at t's end.
func newFaultInspector(t *testing.T) *inspect.Inspector {
	t.Helper()
	return newFaultInspectorWith(t, &inspect.Options{Faults: true})
}

// newRemoteFaultInspector is newFaultInspector with AllowRemote: behind
// a proxy, or on an address other than loopback.
func newRemoteFaultInspector(t *testing.T) *inspect.Inspector {
	t.Helper()
	return newFaultInspectorWith(t, &inspect.Options{Faults: true, AllowRemote: true})
}

func newFaultInspectorWith(t *testing.T, opts *inspect.Options) *inspect.Inspector {
	t.Helper()
	_, in := inspected(t, nil, opts)
	return in
}

// TestFaults_FormBodyBounded: a fault form names an actor, a tool or a
// stream; a body larger than any such form is refused (413) unread
// past the bound, not parsed whole (http.Request.ParseForm alone reads
// up to 10 MB).
func TestFaults_FormBodyBounded(t *testing.T) {
	in := newFaultInspector(t)
	huge := "actor=" + strings.Repeat("a", 1<<20)
	rec := faultPost(in, "http://localhost:8080", "/api/fault/panic", huge, http.Header{"Origin": {"http://localhost:8080"}})
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 1 MiB fault form: %d %q, want 413", rec.Code, rec.Body.String())
	}
	// A form of a long id is still read.
	long := "actor=" + strings.Repeat("a", 2000)
	if rec := faultPost(in, "http://localhost:8080", "/api/fault/panic", long, http.Header{"Origin": {"http://localhost:8080"}}); rec.Code != http.StatusNotFound {
		t.Fatalf("a fault form naming an actor of 2000 bytes: %d %q, want 404 (no such actor)", rec.Code, rec.Body.String())
	}
}

// TestFaults_OriginIsSchemeHostAndPort: a fault post's Origin is the
// inspector's own when its scheme, host and port are the request's
// (default ports written or not): a page served over https on the same
// host and port is another origin, and so is the inspector's page over
// http when it is served over TLS.
func TestFaults_OriginIsSchemeHostAndPort(t *testing.T) {
	in := newFaultInspector(t)
	for _, c := range []struct {
		target, origin string
		refused        bool
	}{
		{"http://localhost:8080", "https://localhost:8080", true},
		{"http://localhost:8080", "http://localhost", true},
		{"http://localhost:8080", "http://localhost:8081", true},
		{"http://localhost:8080", "ftp://localhost:8080", true},
		{"https://localhost:8443", "http://localhost:8443", true},
		{"http://localhost:8080", "http://localhost:8080", false},
		{"http://localhost:8080", "http://LOCALHOST:8080", false},
		{"https://localhost:8443", "https://localhost:8443", false},
		{"http://localhost:80", "http://localhost", false},
		{"http://localhost", "http://localhost:80", false},
		{"https://localhost", "https://localhost:443", false},
		{"http://[::1]:8080", "http://[::1]:8080", false},
	} {
		rec := faultPost(in, c.target, "/api/fault/stall", "tool=nope&on=true", http.Header{"Origin": {c.origin}})
		if refused := rec.Code == http.StatusForbidden; refused != c.refused {
			t.Errorf("POST to %s from Origin %s: %d %q, want refused %v", c.target, c.origin, rec.Code, rec.Body.String(), c.refused)
		}
	}
	// Behind a proxy ending TLS (AllowRemote), the scheme is the one the
	// proxy says it was asked with; without its word, the connection's.
	// Without AllowRemote the proxy's word is not taken: its request is
	// refused before any origin is compared. says is what the refusal
	// names, which tells the origin check from the loopback one.
	remote := newRemoteFaultInspector(t)
	for _, c := range []struct {
		in     *inspect.Inspector
		origin string
		proto  string
		says   string // "" when served
	}{
		{remote, "https://localhost:8080", "https", ""},
		{remote, "http://localhost:8080", "https", "Origin http://localhost:8080"},
		{remote, "https://localhost:8080", "", "Origin https://localhost:8080"},
		{in, "https://localhost:8080", "https", "X-Forwarded-Proto"},
	} {
		h := http.Header{"Origin": {c.origin}}
		if c.proto != "" {
			h.Set("X-Forwarded-Proto", c.proto)
		}
		rec := faultPost(c.in, "http://localhost:8080", "/api/fault/stall", "tool=nope&on=true", h)
		refused := rec.Code == http.StatusForbidden
		if refused != (c.says != "") || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("POST to http://localhost:8080 from Origin %s, X-Forwarded-Proto %q, AllowRemote %v: %d %q, want refused %v saying %q",
				c.origin, c.proto, c.in == remote, rec.Code, strings.TrimSpace(rec.Body.String()), c.says != "", c.says)
		}
	}
}

// TestFaults_PostsSayWhereTheyComeFrom: a fault post with neither Origin
// nor Sec-Fetch-Site is refused: every browser of this decade sends one
// of them with a post, so such a post comes from an old browser (which
// any page could make post) or from a client without one, which can say
// Origin (curl -H 'Origin: http://127.0.0.1:8080').
func TestFaults_PostsSayWhereTheyComeFrom(t *testing.T) {
	in := newFaultInspector(t)
	rec := faultPost(in, "http://localhost:8080", "/api/fault/stall", "tool=nope&on=true", nil)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "Origin") {
		t.Fatalf("a fault post with neither Origin nor Sec-Fetch-Site: %d %q, want 403 saying to send Origin", rec.Code, rec.Body.String())
	}
	for _, h := range []http.Header{
		{"Origin": {"http://localhost:8080"}},
		{"Sec-Fetch-Site": {"same-origin"}},
		{"Sec-Fetch-Site": {"same-origin"}, "Origin": {"http://localhost:8080"}},
	} {
		if rec := faultPost(in, "http://localhost:8080", "/api/fault/stall", "tool=nope&on=true", h); rec.Code != http.StatusNotFound {
			t.Errorf("a fault post with %v: %d %q, want 404 (no such tool)", h, rec.Code, rec.Body.String())
		}
	}
}

// TestFaults_ForwardedProtoOfAChainOfProxies: proxies in a chain may each
// add the scheme they were asked with to X-Forwarded-Proto, the client's
// first ("https, http"): the page's posts through them are its own
// (AllowRemote), and a scheme not http or https is no scheme.
func TestFaults_ForwardedProtoOfAChainOfProxies(t *testing.T) {
	remote := newRemoteFaultInspector(t)
	for _, c := range []struct {
		proto, origin string
		refused       bool
	}{
		{"https, http", "https://inspector.example", false},
		{"https,http", "https://inspector.example", false},
		{"HTTPS , http", "https://inspector.example", false},
		{"https, http", "http://inspector.example", true},
		{"http, https", "https://inspector.example", true},
		{"gopher, https", "http://inspector.example", false}, // no scheme said: the request's own
		{"gopher, https", "https://inspector.example", true},
	} {
		h := http.Header{"Origin": {c.origin}, "X-Forwarded-Proto": {c.proto}, "Sec-Fetch-Site": {"same-origin"}}
		rec := faultPost(remote, "http://inspector.example", "/api/fault/stall", "tool=nope&on=true", h)
		if refused := rec.Code == http.StatusForbidden; refused != c.refused {
			t.Errorf("POST forwarded with X-Forwarded-Proto %q, Origin %s: %d %q, want refused %v", c.proto, c.origin, rec.Code, rec.Body.String(), c.refused)
		}
	}
}

// TestFaults_OriginOfAnIPv6HostWithAZone: a Host header writes an IPv6
// zone as a URL does ("%25" for the '%'), and an Origin parsed is the
// zone unescaped: the inspector's own origin on a link-local address
// (AllowRemote) is still its own.
func TestFaults_OriginOfAnIPv6HostWithAZone(t *testing.T) {
	remote := newRemoteFaultInspector(t)
	for _, c := range []struct {
		host, origin string
		refused      bool
	}{
		{"[fe80::1%25eth0]:8080", "http://[fe80::1%25eth0]:8080", false},
		{"[fe80::1%25eth0]", "http://[fe80::1%25eth0]:80", false},
		{"[FE80::1%25eth0]:8080", "http://[fe80::1%25eth0]:8080", false},
		{"[fe80::1%25eth0]:8080", "http://[fe80::1%25eth1]:8080", true},
		{"[fe80::1%25eth0]:8080", "http://[fe80::1]:8080", true},
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/fault/stall", strings.NewReader("tool=nope&on=true"))
		req.RemoteAddr, req.Host = "[fe80::2%eth0]:5000", c.host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", c.origin)
		rec := httptest.NewRecorder()
		remote.ServeHTTP(rec, req)
		if refused := rec.Code == http.StatusForbidden; refused != c.refused {
			t.Errorf("POST to Host %s from Origin %s: %d %q, want refused %v", c.host, c.origin, rec.Code, rec.Body.String(), c.refused)
		}
	}
}
