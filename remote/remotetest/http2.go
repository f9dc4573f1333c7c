// Package remotetest helps tests speak to the gRPC servers of package
// remote's nodes and clients, and of cluster members, as a peer that
// is none of them would: over a bare HTTP/2 connection, gRPC's framing
// written by hand.
package remotetest

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Patience is the deadline DialHTTP2 sets on its connection: only a
// server that fails its test makes the test wait this long.
const Patience = 30 * time.Second

// DialHTTP2 opens a TCP connection to addr and goes through HTTP/2's
// preface (its own preface and SETTINGS sent; the server's are read with
// the frames that follow), with a deadline of Patience from now. t's
// cleanup closes it. The framer reads header blocks whole
// (http2.MetaHeadersFrame).
func DialHTTP2(t testing.TB, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(Patience)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}
