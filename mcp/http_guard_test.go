package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/actors/actorstest"
	"github.com/polyweave/polyweave-go/mcp"
)

// guardServer is a server of the test tools (run_command among them),
// closed at the test's end.
func guardServer(t *testing.T) *mcp.Server {
	t.Helper()
	_, ts := testTools(t)
	rt := actorstest.NewRuntime(t, nil)
	srv, err := mcp.NewServer(rt, &mcp.ServerOptions{Tools: ts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return srv
}

// handler is srv's handler for opts.
func handler(t *testing.T, srv *mcp.Server, opts *mcp.HTTPOptions) http.Handler {
	t.Helper()
	h, err := srv.Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// initialize sends an initialize request to h as if from the client at
// remote, naming host, with header, and returns the response.
func initialize(h http.Handler, remote, host string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "http://"+host+"/mcp", strings.NewReader(initBody))
	req.RemoteAddr = remote
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// guardCase is a request and the status it is answered with; says is in
// the body of a refusal.
type guardCase struct {
	name, remote, host string
	header             map[string]string
	want               int
	says               string
}

func checkGuard(t *testing.T, h http.Handler, cases []guardCase) {
	t.Helper()
	for _, c := range cases {
		w := initialize(h, c.remote, c.host, c.header)
		if w.Code != c.want || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("%s: status %d (%q), want %d saying %q", c.name, w.Code, strings.TrimSpace(w.Body.String()), c.want, c.says)
		}
	}
}

// Without AllowRemote only this machine's clients are served: a client
// beyond loopback is refused whatever Host it names (Host is what it
// claims, not where it is), and so is a request a proxy forwarded, whose
// client is elsewhere though the proxy connects from loopback.
func TestHandler_LoopbackClientsOnly(t *testing.T) {
	h := handler(t, guardServer(t), nil)
	checkGuard(t, h, []guardCase{
		{"loopback client", "127.0.0.1:40000", "127.0.0.1:8765", nil, http.StatusOK, ""},
		{"loopback client, localhost", "127.0.0.1:40000", "localhost:8765", nil, http.StatusOK, ""},
		{"IPv6 loopback client", "[::1]:40000", "[::1]:8765", nil, http.StatusOK, ""},
		{"remote client naming localhost", "192.0.2.7:40000", "localhost:8765", nil, http.StatusForbidden, "192.0.2.7"},
		{"remote client naming 127.0.0.1", "192.0.2.7:40000", "127.0.0.1", nil, http.StatusForbidden, "AllowRemote"},
		{"remote IPv6 client", "[2001:db8::7]:40000", "[::1]:8765", nil, http.StatusForbidden, "2001:db8::7"},
		{"no client address", "", "localhost", nil, http.StatusForbidden, "loopback"},
		{"Forwarded", "127.0.0.1:40000", "localhost", map[string]string{"Forwarded": "for=203.0.113.9"}, http.StatusForbidden, "Forwarded"},
		{"X-Forwarded-For", "127.0.0.1:40000", "localhost", map[string]string{"X-Forwarded-For": "203.0.113.9"}, http.StatusForbidden, "X-Forwarded-For"},
		{"X-Forwarded-Host", "127.0.0.1:40000", "localhost", map[string]string{"X-Forwarded-Host": "mcp.example"}, http.StatusForbidden, "X-Forwarded-Host"},
		{"X-Real-Ip", "127.0.0.1:40000", "localhost", map[string]string{"X-Real-Ip": "203.0.113.9"}, http.StatusForbidden, "X-Real-Ip"},
		{"X-Forwarded-Proto", "127.0.0.1:40000", "localhost", map[string]string{"X-Forwarded-Proto": "https"}, http.StatusForbidden, "X-Forwarded-Proto"},
		{"rebound host", "127.0.0.1:40000", "evil.example", nil, http.StatusForbidden, "evil.example"},
		{"localhost as a subdomain", "127.0.0.1:40000", "localhost.evil.example", nil, http.StatusForbidden, "localhost.evil.example"},
		{"foreign origin", "127.0.0.1:40000", "localhost", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "evil.example"},
		{"origin under localhost's name", "127.0.0.1:40000", "localhost", map[string]string{"Origin": "http://localhost.evil.example"}, http.StatusForbidden, "Origin"},
		{"loopback origin", "127.0.0.1:40000", "localhost", map[string]string{"Origin": "http://localhost:3000"}, http.StatusOK, ""},
	})
}

// A bearer token without AllowRemote does not open the server to other
// machines: AllowRemote says who may connect, the token authenticates.
func TestHandler_TokenAloneServesLoopback(t *testing.T) {
	h := handler(t, guardServer(t), &mcp.HTTPOptions{BearerToken: "s3cret"})
	auth := map[string]string{"Authorization": "Bearer s3cret"}
	checkGuard(t, h, []guardCase{
		{"loopback client with the token", "127.0.0.1:40000", "localhost", auth, http.StatusOK, ""},
		{"loopback client without it", "127.0.0.1:40000", "localhost", nil, http.StatusUnauthorized, ""},
		{"remote client with the token", "192.0.2.7:40000", "localhost", auth, http.StatusForbidden, "AllowRemote"},
		{"forwarded, with the token", "127.0.0.1:40000", "localhost",
			map[string]string{"Authorization": "Bearer s3cret", "X-Forwarded-For": "203.0.113.9"}, http.StatusForbidden, "X-Forwarded-For"},
	})
}

// With AllowRemote (and so a token) any client with the token is served,
// through a proxy too, as long as it names a loopback or allowed Host and
// comes from a loopback or allowed Origin; without the token it is not,
// whatever Host it names.
func TestHandler_AllowRemoteWithToken(t *testing.T) {
	h := handler(t, guardServer(t), &mcp.HTTPOptions{AllowRemote: true, BearerToken: "s3cret",
		AllowedHosts: []string{"mcp.example"}, AllowedOrigins: []string{"https://app.example"}})
	auth := func(kv ...string) map[string]string {
		m := map[string]string{"Authorization": "Bearer s3cret"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	checkGuard(t, h, []guardCase{
		{"remote client with the token", "192.0.2.7:40000", "mcp.example:8765", auth(), http.StatusOK, ""},
		{"remote client naming localhost with the token", "192.0.2.7:40000", "localhost", auth(), http.StatusOK, ""},
		{"forwarded with the token", "127.0.0.1:40000", "mcp.example", auth("X-Forwarded-For", "203.0.113.9"), http.StatusOK, ""},
		{"allowed origin", "192.0.2.7:40000", "mcp.example", auth("Origin", "https://app.example"), http.StatusOK, ""},
		{"remote client without the token", "192.0.2.7:40000", "mcp.example", nil, http.StatusUnauthorized, ""},
		{"remote client naming localhost without the token", "192.0.2.7:40000", "localhost", nil, http.StatusUnauthorized, ""},
		{"loopback client without the token", "127.0.0.1:40000", "localhost", nil, http.StatusUnauthorized, ""},
		{"wrong token", "192.0.2.7:40000", "mcp.example", map[string]string{"Authorization": "Bearer guess"}, http.StatusUnauthorized, ""},
		{"host not allowed", "192.0.2.7:40000", "other.example", auth(), http.StatusForbidden, "other.example"},
		{"origin not allowed", "192.0.2.7:40000", "mcp.example", auth("Origin", "https://evil.example"), http.StatusForbidden, "evil.example"},
	})
}

// A proxy on this machine connects from loopback and passes a loopback
// Host on: over a real connection, the request it forwards is refused.
func TestListenHTTP_RefusesForwarded(t *testing.T) {
	url, _ := listenHTTP(t, nil)
	if got := post(t, url, map[string]string{"Host": "localhost", "X-Forwarded-For": "203.0.113.9"}); got != http.StatusForbidden {
		t.Errorf("forwarded request: status %d, want %d", got, http.StatusForbidden)
	}
	if got := post(t, url, map[string]string{"Host": "localhost"}); got != http.StatusOK {
		t.Errorf("direct request: status %d, want %d", got, http.StatusOK)
	}
}

// An allowed Host is accepted on a loopback listener too (a name in
// /etc/hosts for 127.0.0.1, say), not only beyond it.
func TestListenHTTP_AllowedHostOnLoopback(t *testing.T) {
	url, _ := listenHTTP(t, &mcp.HTTPOptions{AllowedHosts: []string{"alias.example"}})
	if got := post(t, url, map[string]string{"Host": "alias.example"}); got != http.StatusOK {
		t.Errorf("allowed Host on a loopback listener: status %d, want %d", got, http.StatusOK)
	}
	if got := post(t, url, map[string]string{"Host": "other.example"}); got != http.StatusForbidden {
		t.Errorf("another Host: status %d, want %d", got, http.StatusForbidden)
	}
}

// AllowRemote without a bearer token is refused before anything listens,
// and by Handler, before anything is served:
// any machine on the network could run the tools otherwise.
func TestListenHTTP_AllowRemoteNeedsToken(t *testing.T) {
	srv := guardServer(t)
	for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		h, err := srv.ListenHTTP(&mcp.HTTPOptions{Addr: addr, AllowRemote: true})
		if h != nil {
			_ = h.Close(context.Background())
		}
		if err == nil || !strings.Contains(err.Error(), "BearerToken") {
			t.Errorf("ListenHTTP(%s, AllowRemote, no token): %v, want an error naming BearerToken", addr, err)
		}
	}
	if h, err := srv.Handler(&mcp.HTTPOptions{AllowRemote: true}); h != nil || err == nil || !strings.Contains(err.Error(), "BearerToken") {
		t.Errorf("Handler(AllowRemote, no token): %v, %v; want no handler and an error naming BearerToken", h, err)
	}
}

// An empty name among AllowedHosts or AllowedOrigins is refused where the
// options are given: it would match a request without Host (HTTP/1.0)
// or without Origin.
func TestHandler_EmptyAllowedNameRefused(t *testing.T) {
	srv := guardServer(t)
	for _, o := range []*mcp.HTTPOptions{
		{AllowedHosts: []string{"mcp.example", ""}},
		{AllowedOrigins: []string{" "}},
	} {
		if h, err := srv.Handler(o); h != nil || err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Handler(%+v): %v, %v; want no handler and an error saying a name is empty", o, h, err)
		}
	}
}
