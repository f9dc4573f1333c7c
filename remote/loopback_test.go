package remote_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// fakeNames resolves the names of the tests, and nothing else.
func fakeNames(_ context.Context, host string) ([]net.IPAddr, error) {
	ips := map[string][]string{
		"loop.example":  {"::1", "127.0.0.1"},
		"v6.example":    {"::1"},
		"node.example":  {"10.0.0.7"},
		"mixed.example": {"127.0.0.1", "10.0.0.7"},
	}[host]
	if ips == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, ip := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
	}
	return out, nil
}

// A node runs tools for whoever reaches it, with no authentication: Serve
// refuses an address beyond loopback unless AllowRemote says so, before it
// listens at all. An empty host is every interface; a name is loopback
// only when every address it resolves to is.
func TestServe_RefusesNonLoopback(t *testing.T) {
	remote.SetLookupIP(t, fakeNames)
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.0.0.7:0", "[fe80::1]:0", "node.example:0", "mixed.example:0"} {
		node, err := remote.Serve(&remote.NodeOptions{Address: addr, Tools: []*tools.Tool{echo}})
		if err == nil {
			t.Errorf("Serve on %s: serving at %s, want ErrNotLoopback", addr, node.Address())
			_ = node.Close(context.Background())
			continue
		}
		if !errors.Is(err, remote.ErrNotLoopback) || !strings.Contains(err.Error(), "AllowRemote") {
			t.Errorf("Serve on %s: %v, want ErrNotLoopback and how to allow it", addr, err)
		}
	}
}

// The address a node listens on for a loopback name is the loopback IP the
// name resolves to (IPv4 first), so that what was checked is what listens.
func TestListenAddress(t *testing.T) {
	remote.SetLookupIP(t, fakeNames)
	for addr, want := range map[string]string{
		"127.0.0.1:7710":    "127.0.0.1:7710",
		"127.8.9.1:0":       "127.8.9.1:0",
		"[::1]:7710":        "[::1]:7710",
		"loop.example:7710": "127.0.0.1:7710",
		"v6.example:0":      "[::1]:0",
	} {
		if got, err := remote.ListenAddress(addr); got != want || err != nil {
			t.Errorf("ListenAddress(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := remote.ListenAddress("node.example:0"); err == nil || !strings.Contains(err.Error(), "10.0.0.7") {
		t.Errorf("a name resolving beyond loopback: %v, want the address it resolves to named", err)
	}
	var dnsErr *net.DNSError
	if _, err := remote.ListenAddress("nowhere.example:0"); !errors.As(err, &dnsErr) || errors.Is(err, remote.ErrNotLoopback) {
		t.Errorf("a name that does not resolve: %v, want the lookup's error", err)
	}
}

// Nodes serve on loopback names and IPv6 loopback: localhost (resolved by
// the system) and [::1].
func TestServe_LoopbackNames(t *testing.T) {
	for _, addr := range []string{"localhost:0", "[::1]:0"} {
		node := startNode(t, addr)
		host, _, err := net.SplitHostPort(node.addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("node on %s serves at %s, want a loopback IP", addr, node.addr)
		}
		node.stop()
	}
}
