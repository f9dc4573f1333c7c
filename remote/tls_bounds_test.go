package remote_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/polyweave/polyweave-go/remote"
	"github.com/polyweave/polyweave-go/remote/tlstest"
)

// serveGuarded serves gRPC (no service) as a node, a client or a cluster
// member does: with the guard's server options (a new connection's
// handshake bounded by handshake, 0 for HandshakeTimeout) and, unless t
// is nil, the server option of t.GRPCOptions. It returns the address.
func serveGuarded(tb testing.TB, t *remote.TLS, handshake time.Duration) string {
	tb.Helper()
	g := remote.NewGuard(nil)
	if handshake > 0 {
		remote.SetHandshakeTimeout(g, handshake)
	}
	opts := g.ServerOptions()
	if t != nil {
		server, _, err := t.GRPCOptions()
		if err != nil {
			tb.Fatal(err)
		}
		opts = append(opts, server)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	go func() { _ = s.Serve(l) }()
	tb.Cleanup(s.Stop)
	return l.Addr().String()
}

// TestTLS_CAsCopiedAtStart: the CAs a peer trusts are those of its TLS
// when it starts: a certificate added to the pool later (say, while
// building the next deployment's TLS from it) is not trusted by a peer
// already running.
func TestTLS_CAsCopiedAtStart(t *testing.T) {
	ca, other := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "another CA")
	opts := ca.TLS(t, "node")
	addr := serveGuarded(t, opts, 0)
	block, _ := pem.Decode(other.PEM())
	otherCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	opts.CAs.AddCert(otherCert) // after the start
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{
		Certificates: []tls.Certificate{other.Issue(t, "stranger")}, RootCAs: ca.Pool(),
		MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	if err == nil {
		conn.Close()
		t.Error("a peer with a certificate from a CA added to TLS.CAs after the start was accepted")
	}
}

// TestGuard_DropsConnectionThatNeverShakesHands: a peer that opens a
// connection and sends nothing (no TLS handshake, no HTTP/2 preface)
// holds it, and a descriptor and a goroutine of the server, only for
// the guard's handshake timeout (HandshakeTimeout, shortened here: see
// TestGuard_HandshakeTimeoutByDefault), with or without TLS.
func TestGuard_DropsConnectionThatNeverShakesHands(t *testing.T) {
	const handshake = time.Second
	ca := tlstest.NewCA(t, "deployment CA")
	for name, opts := range map[string]*remote.TLS{"plain": nil, "TLS": ca.TLS(t, "node")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", serveGuarded(t, opts, handshake))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(handshake + 30*time.Second))
			_, err = io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("a connection that never began its handshake was still open %v after the handshake timeout (%v)", 30*time.Second, handshake)
			}
		})
	}
}
