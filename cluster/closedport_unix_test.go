//go:build unix

package cluster_test

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// closedPort returns a loopback port on which nothing listens and which
// nobody else can take while t runs: a TCP socket bound to it, that never
// listens, holds it until t's cleanup, so a connection to it is refused.
// (A port of freePorts is free again as soon as it returns: another
// process may listen on it before the test uses it.)
func closedPort(t *testing.T) int {
	t.Helper()
	// Close on exec: the children the test starts must not hold it.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("closedPort: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("closedPort: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("closedPort: getsockname: %v", err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

// TestClosedPort_RefusesAndIsHeld: nothing listens on closedPort's port,
// so a connection to it is refused, and nobody can take it while the test
// runs (as a concurrent test's member took a port of freePorts, closed as
// soon as it returns, which the test meant as a port nobody listens on).
func TestClosedPort_RefusesAndIsHeld(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Fatalf("connected to %s, which closedPort says nobody listens on", addr)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener took %s while closedPort holds it", addr)
	}
}
