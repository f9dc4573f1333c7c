package remote_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
	"github.com/polyweave/polyweave-go/internal/loopback"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/tools"
)

// testNames are the names the tests resolve (loopback.FakeNames).
var testNames = map[string][]string{
	"node.example":  {"10.0.0.7"},
	"mixed.example": {"127.0.0.1", "10.0.0.7"},
}

// beyondLoopback are addresses that reach beyond this machine (with
// testNames): every interface (an empty host, or an unspecified IP),
// other IPs, and names that resolve to any address beyond loopback.
var beyondLoopback = []string{"0.0.0.0:0", ":0", "[::]:0", "10.0.0.7:0", "[fe80::1]:0", "node.example:0", "mixed.example:0"}

// refusesBeyondLoopback checks that start refuses every address of
// beyondLoopback with ErrNotLoopback, naming option (the field that
// allows it), before it starts anything; what start did start, stop
// stops.
func refusesBeyondLoopback(t *testing.T, option string, start func(addr string) (where string, stop func(), err error)) {
	t.Helper()
	loopback.FakeNames(t, testNames)
	before := goleak.IgnoreCurrent()
	for _, addr := range beyondLoopback {
		where, stop, err := start(addr)
		if err == nil {
			t.Errorf("on %s: listening at %s, want ErrNotLoopback", addr, where)
			stop()
			continue
		}
		if !errors.Is(err, remote.ErrNotLoopback) || !strings.Contains(err.Error(), option) {
			t.Errorf("on %s: %v, want ErrNotLoopback and how to allow it (%s)", addr, err, option)
		}
	}
	leakcheck.VerifyNone(t, before)
}

// A node runs tools for whoever reaches it, with no authentication: Serve
// refuses an address beyond loopback unless AllowRemote says so, before it
// listens at all. An empty host is every interface; a name is loopback
// only when every address it resolves to is.
func TestServe_RefusesNonLoopback(t *testing.T) {
	echo := tools.MustNew(tools.Definition{Name: "echo", Sync: true})
	refusesBeyondLoopback(t, "NodeOptions.AllowRemote", func(addr string) (string, func(), error) {
		node, err := remote.Serve(&remote.NodeOptions{Address: addr, Tools: []*tools.Tool{echo}})
		if err != nil {
			return "", nil, err
		}
		return node.Address(), func() { _ = node.Close(context.Background()) }, nil
	})
}

// Nodes serve on loopback names and IPv6 loopback: localhost (resolved by
// the system) and [::1].
func TestServe_LoopbackNames(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"localhost:0", "[::1]:0"} {
		node := startNode(t, addr)
		host, _, err := net.SplitHostPort(node.addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("node on %s serves at %s, want a loopback IP", addr, node.addr)
		}
		node.stop()
	}
}

// A client listens too (nodes answer it there), with no more
// authentication than a node: whoever reaches it can answer its calls.
// NewClient refuses an address beyond loopback unless AllowRemote says
// so, before it starts anything.
func TestNewClient_RefusesNonLoopback(t *testing.T) {
	refusesBeyondLoopback(t, "ClientOptions.AllowRemote", func(addr string) (string, func(), error) {
		c, err := remote.NewClient(&remote.ClientOptions{Address: addr})
		if err != nil {
			return "", nil, err
		}
		return c.Address(), func() { _ = c.Close(context.Background()) }, nil
	})
}

// runClientAt starts a client on the address in v ("allow-remote ADDR":
// with AllowRemote), prints "listening ADDR" (the client's address) or
// "refused ERR", and closes it once stdin closes.
func runClientAt(v string) int {
	addr, allow := strings.CutPrefix(v, "allow-remote ")
	c, err := remote.NewClient(&remote.ClientOptions{Address: addr, AllowRemote: allow})
	if err != nil {
		fmt.Println("refused", err)
		return 0
	}
	fmt.Println("listening", c.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := c.Close(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Clients listen on loopback names and IPv6 loopback: localhost (resolved
// by the system) and [::1], at the loopback IP that was checked; and on
// every interface when AllowRemote says so. Each runs in a child process:
// a process should run one protoactor remote.
func TestNewClient_ListenAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr     string
		loopback bool
	}{{"localhost:0", true}, {"[::1]:0", true}, {"allow-remote 0.0.0.0:0", false}} {
		p := startChild(t, envClientAt+"="+c.addr)
		e := p.next(t)
		p.stop()
		got, ok := strings.CutPrefix(e, "listening ")
		host, _, err := net.SplitHostPort(got)
		if ip := net.ParseIP(host); !ok || err != nil || ip == nil || c.loopback && !ip.IsLoopback() {
			t.Errorf("client on %s: %q, want it listening at an IP (a loopback one: %v)", c.addr, e, c.loopback)
		}
	}
}
