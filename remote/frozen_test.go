package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// envFrozen: call hold on the node at this address (see runFrozen).
const envFrozen = "POLYWEAVE_REMOTE_TEST_FROZEN"

// frozenPingTimeout is how long runFrozen's client (and runTestNode's
// node) waits for the answer to a ping.
const frozenPingTimeout = time.Second

// pingPatience is how long the tests of pings wait for a peer to be found
// out: long past the keepalive time and timeout, on a loaded machine.
const pingPatience = time.Minute

// runFrozen runs a client, with default options but a ping timeout of
// frozenPingTimeout, that calls hold (id "c") on the node at addr and
// prints "calling"; once the call is answered it prints "call ERR". When
// stdin closes it closes the client and prints "close ERR", then the
// goroutines left ("leaks none" when none).
func runFrozen(addr string) int {
	c, hold := holdOf(&remote.ClientOptions{KeepaliveTimeout: frozenPingTimeout}, addr)
	if c == nil {
		return 1
	}
	if hold != nil {
		fmt.Println("calling")
		_, err := hold.Definition().Handler(context.Background(), json.RawMessage(`{"id":"c"}`))
		fmt.Println("call", err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Println("close", oneLine(c.Close(context.Background())))
	printLeaks()
	return 0
}
