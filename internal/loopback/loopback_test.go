package loopback_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/internal/loopback"
)

// errRefused stands for a caller's own sentinel.
var errRefused = errors.New("not a loopback address")

// names are the names the tests resolve; any other does not resolve.
var names = map[string][]string{
	"localhost":     {"127.0.0.1", "::1"},
	"loop.example":  {"::1", "127.0.0.1"},
	"v6.example":    {"::1"},
	"node.example":  {"10.0.0.7"},
	"lan.example":   {"192.168.1.20"},
	"mixed.example": {"127.0.0.1", "10.0.0.7"},
	"empty.example": {},
}

// A name a peer sends is loopback only as written: a loopback IP, with or
// without port and brackets, or localhost in any case. Nothing is
// resolved, not even a name that would resolve to loopback alone.
func TestIsName(t *testing.T) {
	loopback.FakeNames(t, names)
	for host, want := range map[string]bool{
		"127.0.0.1":              true,
		"127.8.9.1:80":           true,
		"::1":                    true,
		"[::1]":                  true,
		"[::1]:0":                true,
		"localhost":              true,
		"LocalHost:8080":         true,
		"0.0.0.0":                false,
		"0.0.0.0:8080":           false,
		"[::]:0":                 false,
		"":                       false,
		":8080":                  false,
		"192.168.1.20":           false,
		"192.168.1.20:80":        false,
		"[fe80::1]:0":            false,
		"loop.example":           false,
		"loop.example:80":        false,
		"localhost.evil.example": false,
		"127.0.0.1.evil.example": false,
	} {
		if got := loopback.IsName(host); got != want {
			t.Errorf("IsName(%q) = %v, want %v", host, got, want)
		}
	}
}

// An address to listen on is checked by what it resolves to, and listened
// on at the loopback IP that was checked (IPv4 first); anything that
// reaches beyond this machine is refused with the caller's sentinel, and
// other failures are told apart from a refusal.
func TestListenAddress(t *testing.T) {
	loopback.FakeNames(t, names)
	const refused, failed = "refused", "failed"
	for _, c := range []struct{ addr, want, says string }{
		{"127.0.0.1:7710", "127.0.0.1:7710", ""},
		{"127.8.9.1:0", "127.8.9.1:0", ""},
		{"[::1]:0", "[::1]:0", ""},
		{"localhost:8080", "127.0.0.1:8080", ""},
		{"loop.example:7710", "127.0.0.1:7710", ""},
		{"v6.example:0", "[::1]:0", ""},
		{"0.0.0.0:0", refused, "every interface"},
		{":8080", refused, "every interface"},
		{"[::]:0", refused, "every interface"},
		{"192.168.1.20:0", refused, "192.168.1.20"},
		{"[fe80::1]:0", refused, ""},
		{"node.example:0", refused, "resolves to 10.0.0.7"},
		{"lan.example:80", refused, "resolves to 192.168.1.20"},
		{"mixed.example:0", refused, "resolves to 10.0.0.7"},
		{"nowhere.example:0", failed, "no such host"},
		{"empty.example:0", failed, "no address"},
		{"", failed, "missing port"},
		{"127.0.0.1", failed, "missing port"},
	} {
		got, err := loopback.ListenAddress(c.addr, errRefused)
		switch c.want {
		case refused:
			if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("ListenAddress(%q) = %q, %v; want the caller's sentinel, saying %q", c.addr, got, err, c.says)
			}
		case failed:
			if err == nil || errors.Is(err, errRefused) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("ListenAddress(%q) = %q, %v; want an error saying %q, not a refusal", c.addr, got, err, c.says)
			}
		default:
			if got != c.want || err != nil {
				t.Errorf("ListenAddress(%q) = %q, %v; want %q", c.addr, got, err, c.want)
			}
		}
	}
	var dnsErr *net.DNSError
	if _, err := loopback.ListenAddress("nowhere.example:0", errRefused); !errors.As(err, &dnsErr) {
		t.Errorf("a name that does not resolve: %v, want the resolver's error", err)
	}
}

// Without FakeNames, names are the system's: localhost is loopback on any
// machine.
func TestListenAddress_SystemNames(t *testing.T) {
	got, err := loopback.ListenAddress("localhost:0", errRefused)
	host, port, splitErr := net.SplitHostPort(got)
	if ip := net.ParseIP(host); err != nil || splitErr != nil || ip == nil || !ip.IsLoopback() || port != "0" {
		t.Errorf("ListenAddress(localhost:0) = %q, %v; want a loopback IP, port 0", got, err)
	}
}

// A request is a loopback client's when it connected from a loopback IP
// and carries none of a proxy's forwarding headers: a proxy on this
// machine connects from loopback, but its client is elsewhere.
func TestCheckClient(t *testing.T) {
	for _, c := range []struct {
		remote        string
		header, value string
		says          string // in the refusal; "" for none
	}{
		{"127.0.0.1:40000", "", "", ""},
		{"127.8.9.1:1", "", "", ""},
		{"[::1]:40000", "", "", ""},
		{"[::1]:40000", "X-Request-Id", "7", ""},
		{"192.0.2.7:40000", "", "", `client "192.0.2.7:40000" is not on a loopback address`},
		{"[2001:db8::7]:40000", "", "", "2001:db8::7"},
		{"0.0.0.0:40000", "", "", "0.0.0.0"},
		{"", "", "", `client ""`},
		{"localhost:40000", "", "", "localhost"}, // a name is not an address
		{"127.0.0.1:40000", "Forwarded", "for=203.0.113.9", `forwarded by a proxy (Forwarded: "for=203.0.113.9")`},
		{"127.0.0.1:40000", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-For"},
		{"127.0.0.1:40000", "X-Forwarded-Host", "mcp.example", "X-Forwarded-Host"},
		{"127.0.0.1:40000", "X-Real-Ip", "203.0.113.9", "X-Real-Ip"},
		{"127.0.0.1:40000", "X-Forwarded-Proto", "https", "X-Forwarded-Proto"},
		{"127.0.0.1:40000", "X-Forwarded-Port", "443", "X-Forwarded-Port"},
		{"127.0.0.1:40000", "Via", "1.1 proxy.example", "Via"},
		{"[::1]:40000", "x-forwarded-proto", "http", "X-Forwarded-Proto"},
		{"127.0.0.1:40000", "X-Forwarded-For", strings.Repeat("9", 500), strings.Repeat("9", 100) + "…"},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		if c.header != "" {
			r.Header.Set(c.header, c.value)
		}
		err := loopback.CheckClient(r)
		if c.says == "" && err != nil || c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)) {
			t.Errorf("CheckClient(%q, %s: %.20q) = %v, want an error saying %q (none if empty)", c.remote, c.header, c.value, err, c.says)
		}
	}
}

// A client of a Unix domain socket is on this machine whatever its
// RemoteAddr says ("@" or ""), unless a proxy forwarded its request.
func TestCheckClient_UnixSocket(t *testing.T) {
	unix := context.WithValue(context.Background(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"})
	tcp := context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80})
	for _, c := range []struct {
		ctx       context.Context
		remote    string
		forwarded bool
		ok        bool
	}{
		{unix, "@", false, true},
		{unix, "", false, true},
		{unix, "@", true, false},
		{tcp, "@", false, false},
		{context.Background(), "@", false, false},
	} {
		r := (&http.Request{RemoteAddr: c.remote, Header: http.Header{}}).WithContext(c.ctx)
		if c.forwarded {
			r.Header.Set("X-Forwarded-For", "203.0.113.9")
		}
		if err := loopback.CheckClient(r); (err == nil) != c.ok {
			t.Errorf("CheckClient(local %v, remote %q, forwarded %v) = %v, want ok=%v", c.ctx.Value(http.LocalAddrContextKey), c.remote, c.forwarded, err, c.ok)
		}
	}
}

// Each of ForwardedHeaders, alone, makes a request that a proxy on this
// machine passed to a real server (Host rewritten to the upstream's
// loopback address, as nginx's proxy_pass does) its client's, not a
// loopback one; without it, the same request is a loopback client's.
func TestCheckClient_OverHTTP(t *testing.T) {
	checked := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { checked <- loopback.CheckClient(r) }))
	defer srv.Close()
	// check sends a request from this machine to srv's loopback address,
	// with header set to value unless header is empty.
	check := func(header, value string) error {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-checked
	}
	if err := check("", ""); err != nil {
		t.Fatalf("a loopback client, not forwarded: %v, want none", err)
	}
	values := map[string]string{
		"Forwarded":         "for=203.0.113.9;proto=https",
		"X-Forwarded-For":   "203.0.113.9",
		"X-Forwarded-Host":  "inspector.example",
		"X-Forwarded-Proto": "https",
		"X-Forwarded-Port":  "443",
		"X-Real-Ip":         "203.0.113.9",
		"Via":               "1.1 proxy.example",
	}
	for _, h := range loopback.ForwardedHeaders {
		if _, ok := values[h]; !ok {
			t.Errorf("ForwardedHeaders has %s, which this test has no value for", h)
		}
	}
	for h, v := range values {
		if err := check(h, v); err == nil || !strings.Contains(err.Error(), h) {
			t.Errorf("forwarded with %s: %s alone: %v, want an error naming it", h, v, err)
		}
	}
}
