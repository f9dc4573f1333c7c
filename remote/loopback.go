package remote

import (
	"errors"
	"fmt"

	"github.com/polyweave/polyweave-go/internal/loopback"
)

// ErrNotLoopback is returned (wrapped) by [Serve] and [NewClient] for an
// address that is not a loopback one, unless NodeOptions.AllowRemote or
// ClientOptions.AllowRemote, with TLS or without: without TLS neither has
// authentication, so whoever reaches a node runs its tools, and whoever
// reaches a client can answer its calls; with TLS, any peer with a
// certificate from its CAs can, from wherever the address is reached.
var ErrNotLoopback = errors.New("not a loopback address")

// listenAddress returns the address a node or client listens on for
// address: address itself when allowRemote, else the loopback IP it was
// checked for (see loopback.ListenAddress). A refusal names option, the
// field that allows it, and risk, what it exposes.
func listenAddress(address string, allowRemote bool, option, risk string) (string, error) {
	if allowRemote {
		return address, nil
	}
	addr, err := loopback.ListenAddress(address, ErrNotLoopback)
	switch {
	case errors.Is(err, ErrNotLoopback):
		return "", fmt.Errorf("remote: %w (set %s to listen beyond this machine: %s)", err, option, risk)
	case err != nil:
		return "", fmt.Errorf("remote: %w", err)
	}
	return addr, nil
}
