package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/remotetest"
)

// TestStart_RefusesConnectionsOverPerPeerLimit: a member bounds what one
// peer's connections can make it hold as the remote package's nodes and
// clients do: a peer with MaxConnsPerPeer connections open has one more
// refused, told why (a GOAWAY naming the limit). Its server was built
// apart from theirs, and took none of their limits.
func TestStart_RefusesConnectionsOverPerPeerLimit(t *testing.T) {
	leakCheck(t)
	const perPeer = 2
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", closedPort(t))}
	m := startMember(t, &cluster.Options{Client: true, Store: openStore(t, freshSchema()), Hold: 200 * time.Millisecond,
		Provider: cluster.Automanaged(0, hosts, 100*time.Millisecond), MaxConnsPerPeer: perPeer})
	for i := range perPeer + 1 {
		_, fr := remotetest.DialHTTP2(t, m.Address())
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		var goAway *http2.GoAwayFrame
		for goAway == nil {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("connection %d: %v", i+1, err)
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				break
			}
			goAway, _ = f.(*http2.GoAwayFrame)
		}
		switch {
		case i < perPeer && goAway != nil:
			t.Fatalf("connection %d, within the limit, refused: %q", i+1, goAway.DebugData())
		case i == perPeer && goAway == nil:
			t.Fatalf("connection %d, over the limit of %d, served", i+1, perPeer)
		case i == perPeer && (goAway.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(goAway.DebugData()), remote.ErrTooManyConns.Error())):
			t.Fatalf("connection over the limit: GOAWAY %v %q, want ENHANCE_YOUR_CALM naming the limit", goAway.ErrCode, goAway.DebugData())
		}
	}
}
