package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// ErrNotLoopback is returned (wrapped) by [Serve] and [NewClient] for an
// address that is not a loopback one, unless NodeOptions.AllowRemote or
// ClientOptions.AllowRemote: neither has authentication, so whoever
// reaches a node runs its tools, and whoever reaches a client can answer
// its calls.
var ErrNotLoopback = errors.New("not a loopback address")

// lookupIPAddr resolves the names of listen addresses; tests replace it.
var lookupIPAddr = net.DefaultResolver.LookupIPAddr

// listenAddress returns the address to listen on for address (host:port)
// when only loopback is allowed: address itself for a loopback IP, the
// loopback IP a name resolves to (IPv4 first) for a name, so that what
// was checked is what listens. An empty host (every interface), another
// IP, or a name that resolves to any address beyond loopback is refused
// with ErrNotLoopback.
func listenAddress(address string) (string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("remote: address %q: %w", address, err)
	}
	if host == "" {
		return "", fmt.Errorf("remote: listen on %q (every interface): %w", address, ErrNotLoopback)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return "", fmt.Errorf("remote: listen on %q: %w", address, ErrNotLoopback)
		}
		return address, nil
	}
	addrs, err := lookupIPAddr(context.Background(), host)
	if err != nil {
		return "", fmt.Errorf("remote: listen on %q: %w", address, err)
	}
	var ip net.IP
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return "", fmt.Errorf("remote: listen on %q (%s resolves to %s): %w", address, host, a.IP, ErrNotLoopback)
		}
		if ip == nil || ip.To4() == nil && a.IP.To4() != nil {
			ip = a.IP
		}
	}
	if ip == nil {
		return "", fmt.Errorf("remote: listen on %q: %s resolves to no address", address, host)
	}
	return net.JoinHostPort(ip.String(), port), nil
}
