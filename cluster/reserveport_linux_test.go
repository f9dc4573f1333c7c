package cluster_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// reservedPorts returns n loopback ports that no other process can take
// while t runs, for members in child processes that answer health checks
// on them and whose replacements (after a kill) take the same ports: each
// is held by a socket of this process bound to it with SO_REUSEPORT, that
// never listens, until t's cleanup. A child listens on one with
// listenReserved, which sets SO_REUSEPORT too, so the kernel lets both
// hold the port; another process, which does not set it (or runs as
// another user), cannot bind it, before the child listens, or between a
// child's death and its replacement's start, as it could a port found
// free and passed on. No connection reaches the sockets that do not
// listen: one while no child listens is refused.
func reservedPorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		// Close on exec: the children the test starts must not hold it.
		syscall.ForkLock.RLock()
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err == nil {
			syscall.CloseOnExec(fd)
		}
		syscall.ForkLock.RUnlock()
		if err != nil {
			t.Fatalf("reservedPorts: socket: %v", err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			t.Fatalf("reservedPorts: SO_REUSEPORT: %v", err)
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatalf("reservedPorts: bind: %v", err)
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			t.Fatalf("reservedPorts: getsockname: %v", err)
		}
		ports[i] = sa.(*syscall.SockaddrInet4).Port
	}
	return ports
}

// listenReserved listens on loopback's port, a port of reservedPorts
// (held by the parent process).
func listenReserved(port int) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("listen on the reserved port %d: %w", port, err)
	}
	return l, nil
}

// TestReservedPorts_HeldAndListenable: nobody else can bind a port of
// reservedPorts while the test runs, a connection to it is refused until
// listenReserved listens on it, and it can be listened on again once that
// listener has closed (a member's replacement after a kill).
func TestReservedPorts_HeldAndListenable(t *testing.T) {
	port := reservedPorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener without SO_REUSEPORT took %s while it is reserved", addr)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("connected to %s, on which nothing listens", addr)
	}
	for range 2 {
		l, err := listenReserved(port)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Errorf("dial %s while listenReserved listens: %v", addr, err)
		} else {
			c.Close()
		}
		l.Close()
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a listener without SO_REUSEPORT took %s once the reserved one closed", addr)
	}
}
