package remote

import (
	"context"
	"net"
	"testing"
)

// Routes counts the calls n still routes a result for: calls that went to
// a tool and whose result has not gone back to the caller.
func Routes(n *Node) int {
	count := 0
	n.routes.Range(func(any, any) bool { count++; return true })
	return count
}

// ListenAddress is the address a node listens on for address, unless it
// allows remote peers.
var ListenAddress = listenAddress

// SetLookupIP makes Serve resolve names with lookup until t ends.
func SetLookupIP(t testing.TB, lookup func(context.Context, string) ([]net.IPAddr, error)) {
	old := lookupIPAddr
	lookupIPAddr = lookup
	t.Cleanup(func() { lookupIPAddr = old })
}
