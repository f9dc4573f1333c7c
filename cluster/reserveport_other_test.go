//go:build !linux

package cluster_test

import (
	"fmt"
	"net"
	"testing"
)

// reservedPorts returns n loopback ports for members in child processes
// whose replacements take the same ports. Here they are stablePorts':
// free when it returns, and another process may take one meanwhile (see
// the Linux version, which holds them).
func reservedPorts(t *testing.T, n int) []int {
	t.Helper()
	return stablePorts(t, n)
}

// listenReserved listens on loopback's port, a port of reservedPorts.
func listenReserved(port int) (net.Listener, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w", port, err)
	}
	return l, nil
}
