//go:build !unix

package cluster_test

import "testing"

// closedPort returns a loopback port on which nothing listens. Here it is
// only free when it returns: another process may take it (see the unix
// version, which holds it).
func closedPort(t *testing.T) int {
	t.Helper()
	return freePorts(t, 1)[0]
}
