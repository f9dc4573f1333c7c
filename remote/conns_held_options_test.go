package remote_test

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/polyweave/polyweave-go/remote"
)

// TestConnServerOptionsHeld_BoundsAHeldMessage: a server with
// ConnServerOptionsHeld's options (a protoactor remote started elsewhere:
// a cluster member's) holds a message not yet whole for the timeout
// given, as a node does for its HeldMessageTimeout: a peer that sends
// part of one and nothing more is told why its connection closes.
func TestConnServerOptionsHeld_BoundsAHeldMessage(t *testing.T) {
	opts, err := remote.ConnServerOptionsHeld(nil, 0, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, grpc.NewServer(opts...))
	c := dialRaw(t, addr)
	c.open(t, 1)
	c.claim(t, 1, 1<<20, 1<<10)
	g := c.goAwayOf(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "not whole within 200ms") {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM saying the message was held too long", g.ErrCode, g.DebugData())
	}
}
