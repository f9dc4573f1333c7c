//go:build linux

package sandbox

import (
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// The Landlock domain refuses, where the kernel can (ABI 9 or later),
// every Unix socket made outside the sandbox and reached by its path,
// whatever the network: no rule grants that right anywhere. Signals and
// abstract Unix sockets are scoped to the domain.
func TestLandlockRefusesOutsideUnixSockets(t *testing.T) {
	for _, noNet := range []bool{false, true} {
		cfg := landlockConfig(noNet)
		if cfg.HandledAccessFS&ll.AccessFSResolveUnix == 0 {
			t.Errorf("no network %v: Landlock does not handle reaching Unix sockets by path: %v", noNet, cfg)
		}
		if want := landlock.ScopedSet(ll.ScopeAbstractUnixSocket | ll.ScopeSignal); cfg.Scoped&want != want {
			t.Errorf("no network %v: Landlock does not scope signals and abstract sockets: %v", noNet, cfg)
		}
	}
}
