package cluster_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/polyweave/polyweave-go/cluster"
	"github.com/polyweave/polyweave-go/remote/remotetest"
)

// TestStart_HeldMessageTimeout: a member holds a message not yet whole
// for Options.HeldMessageTimeout, as the remote package's nodes do for
// theirs: a peer that sends part of one and nothing more is told why its
// connection closes (a GOAWAY naming the timeout), long before the
// default of two minutes.
func TestStart_HeldMessageTimeout(t *testing.T) {
	leakCheck(t)
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", closedPort(t))}
	m := startMember(t, &cluster.Options{Client: true, Store: openStore(t, freshSchema()), Hold: 200 * time.Millisecond,
		Provider: cluster.Automanaged(0, hosts, 100*time.Millisecond), HeldMessageTimeout: 200 * time.Millisecond})
	_, fr := remotetest.DialHTTP2(t, m.Address())
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/remote.Remoting/Receive"},
		{":authority", m.Address()}, {"content-type", "application/grpc"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// The prefix of a message of 1 MiB, and 1 KiB of it.
	part := make([]byte, 5+1<<10)
	binary.BigEndian.PutUint32(part[1:], 1<<20)
	if err := fr.WriteData(1, false, part); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended with %v before a GOAWAY", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "not whole within 200ms") {
				t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM saying the message was held too long", g.ErrCode, g.DebugData())
			}
			return
		}
	}
}
