package loopback

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// ForwardedHeaders are the headers by which a request shows that a proxy
// forwarded it: those with which a proxy names the client it forwards for
// (Forwarded, X-Forwarded-For, X-Real-Ip), and those a proxy sets alone
// to say what the client asked for (X-Forwarded-Host, -Proto and -Port:
// nginx configured with X-Forwarded-Proto only, say, and passing
// the upstream's loopback Host, as it does by default) or that it came
// through (Via). Browsers send none of them, and a client on this machine
// has no need to.
var ForwardedHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Real-Ip", "Via"}

// CheckClient refuses a request whose client is not on a loopback IP
// (r.RemoteAddr; a name is not an address) and did not connect to a Unix
// domain socket (whose clients are on this machine, their RemoteAddr "@"
// or empty), or that carries one of
// [ForwardedHeaders]: a proxy on this machine connects from loopback, and
// may pass a loopback Host on, but the client it forwards for is
// elsewhere. Its errors say what was refused, not how to allow it: the
// caller adds that.
func CheckClient(r *http.Request) error {
	if !overUnixSocket(r) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("client %q is not on a loopback address", r.RemoteAddr)
		}
	}
	for _, h := range ForwardedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			value := strings.Join(v, ", ")
			if len(value) > 100 {
				value = value[:100] + "…"
			}
			return fmt.Errorf("request forwarded by a proxy (%s: %q): its client is not known to be on a loopback address", h, value)
		}
	}
	return nil
}

// overUnixSocket reports whether r came over a Unix domain socket: the
// local address net/http's server puts in the request's context is one.
func overUnixSocket(r *http.Request) bool {
	_, ok := r.Context().Value(http.LocalAddrContextKey).(*net.UnixAddr)
	return ok
}
