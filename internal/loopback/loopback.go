// Package loopback tells whether an address stays on this machine. The
// packages that listen, or answer, on loopback only unless told otherwise
// (inspect, mcp and remote) ask it, so that they agree on what loopback
// is; each wraps its own sentinel error in the refusals, so that its
// callers' errors.Is keeps working.
//
// It answers two questions differently. A name a peer sends (a Host or
// Origin header) is loopback only as written, a loopback IP or localhost,
// and is never resolved: a name that resolves to loopback now may resolve
// elsewhere a moment later (DNS rebinding). An address to listen on is
// resolved once and listened on at the loopback IP that was checked, so a
// name all of whose addresses are loopback ones will do. A request's
// client ([CheckClient]) is loopback by the address it connected from,
// and only when no proxy forwarded the request.
package loopback

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// IsName reports whether host, a host or host:port (an IPv6 address with
// or without brackets), names this machine's loopback as written: a
// loopback IP (127.0.0.0/8, ::1) or localhost, in any case. It resolves
// nothing.
func IsName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// lookup resolves the names of listen addresses; FakeNames replaces it.
var lookup = net.DefaultResolver.LookupIPAddr

// ListenAddress returns the address to listen on for address (host:port)
// when only loopback is allowed: address itself for a loopback IP, and for
// a name the loopback IP it resolves to (IPv4 first), so that what was
// checked is what listens. An empty host or an unspecified IP (every
// interface), another IP, or a name that resolves to any address beyond
// loopback is refused with an error wrapping notLoopback, the caller's
// own sentinel. A name that does not resolve fails with the resolver's
// error, an address that is not host:port with net.SplitHostPort's.
func ListenAddress(address string, notLoopback error) (string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("listen on %q: %w", address, err)
	}
	ip := net.ParseIP(host)
	if host == "" || ip.IsUnspecified() {
		return "", fmt.Errorf("listen on %q (every interface): %w", address, notLoopback)
	}
	if ip != nil {
		if !ip.IsLoopback() {
			return "", fmt.Errorf("listen on %q: %w", address, notLoopback)
		}
		return address, nil
	}
	addrs, err := lookup(context.Background(), host)
	if err != nil {
		return "", fmt.Errorf("listen on %q: %w", address, err)
	}
	var checked net.IP
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return "", fmt.Errorf("listen on %q (%s resolves to %s): %w", address, host, a.IP, notLoopback)
		}
		if checked == nil || checked.To4() == nil && a.IP.To4() != nil {
			checked = a.IP
		}
	}
	if checked == nil {
		return "", fmt.Errorf("listen on %q: %s resolves to no address", address, host)
	}
	return net.JoinHostPort(checked.String(), port), nil
}

// FakeNames makes ListenAddress resolve names from names (each name's IPs)
// instead of the system's resolver until t's cleanup, for tests (t is a
// *testing.T or B); a name not in it does not resolve. Tests that use it
// must not run in parallel with others that listen.
func FakeNames(t interface{ Cleanup(func()) }, names map[string][]string) {
	old := lookup
	lookup = func(_ context.Context, host string) ([]net.IPAddr, error) {
		ips, ok := names[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]net.IPAddr, 0, len(ips))
		for _, ip := range ips {
			out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
		}
		return out, nil
	}
	t.Cleanup(func() { lookup = old })
}
