package remote_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/polyweave/polyweave-go/remote"
)

// envProxyFails: start a client whose actor cannot be spawned (see
// runProxyFails), and print "new ERR", "running [NAMES]" (protoactor's
// remote actors still running) and the goroutines left.
const envProxyFails = "POLYWEAVE_REMOTE_TEST_PROXY_FAILS"

// errNoProxy is the failure runProxyFails forces on the client's actor.
var errNoProxy = errors.New("no room for the proxy")

func runProxyFails(string) int {
	running := remote.FailProxySpawn(errNoProxy)
	c, err := remote.NewClient(nil)
	if err == nil {
		fmt.Println("new: started a client at", c.Address())
		return 1
	}
	fmt.Println("new", oneLine(err))
	fmt.Println("running", running())
	printLeaks()
	return 0
}

// A client whose actor cannot be spawned fails NewClient, having stopped
// the remote it had started as Close stops it: its endpoints, the
// activator and the guard, with nothing left running.
func TestNewClient_ProxyFailureStopsTheRemote(t *testing.T) {
	t.Parallel()
	p := startChild(t, envProxyFails+"=1")
	if e := p.next(t); !strings.HasPrefix(e, "new ") || !strings.Contains(e, "spawn client proxy") || !strings.HasSuffix(e, errNoProxy.Error()) {
		t.Errorf("%s; want the spawn's failure", e)
	}
	p.want(t, "running []", "%s; want protoactor's remote actors stopped")
	p.want(t, "leaks none", "%s")
}
