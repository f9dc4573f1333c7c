package remote_test

import (
	"net"
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
	srv := grpc.NewServer(opts...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served // TestMain checks for goroutines left
	})
	c := dialRaw(t, l.Addr().String())
	c.open(t, 1)
	c.claim(t, 1, 1<<20, 1<<10)
	g := c.goAwayOf(t)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "not whole within 200ms") {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM saying the message was held too long", g.ErrCode, g.DebugData())
	}
}
