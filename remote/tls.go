package remote

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLS is the mutual TLS of a node, a client or a cluster member: every
// connection between peers is encrypted, and each side proves who it is
// to the other with a certificate that chains to CAs.
//
// A protoactor remote connects both ways: each side serves (its peers
// connect to it to send it messages) and dials (it connects to its peers
// to send them messages, answers included). So each side presents
// Certificate both as a server and as a client, and requires and checks
// its peer's both ways: a peer without a certificate, or with one that
// does not chain to CAs, cannot open a connection, so it cannot send a
// node a call, nor a client an answer.
//
// Certificate must therefore:
//   - name the host its owner is reached at (the host of NodeOptions,
//     ClientOptions or cluster Options' Address, as peers dial it) among
//     its subject alternative names: an IP address, such as 127.0.0.1,
//     or a DNS name, such as localhost;
//   - be valid for both server and client authentication (extended key
//     usages serverAuth and clientAuth, or none).
//
// Any peer with a certificate from CAs is trusted alike: it may run every
// tool of a node. Have the CAs issue certificates to the nodes, clients
// and members of one deployment only.
type TLS struct {
	// Certificate is this side's certificate chain and private key (see
	// tls.LoadX509KeyPair, or [LoadTLS]).
	Certificate tls.Certificate
	// CAs are the certificate authorities a peer's certificate must chain
	// to.
	CAs *x509.CertPool
}

// ErrTLSConfig is the cause of the error that [Serve], [NewClient],
// [LoadTLS] and [TLS.GRPCOptions] return for a TLS that cannot work: no
// certificate or key, no CAs, files that cannot be read or parsed.
var ErrTLSConfig = errors.New("bad TLS configuration")

// LoadTLS reads the PEM files of a [TLS]: certFile (this side's
// certificate, followed by any intermediate certificates), keyFile (its
// private key) and caFile (one or more CA certificates that peers'
// certificates must chain to).
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("remote: TLS certificate %s and key %s: %w: %w", certFile, keyFile, ErrTLSConfig, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("remote: TLS CAs: %w: %w", ErrTLSConfig, err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("remote: TLS CAs %s: %w: no PEM certificate in it", caFile, ErrTLSConfig)
	}
	return &TLS{Certificate: cert, CAs: cas}, nil
}

// check returns an error wrapping ErrTLSConfig, naming field, when t
// cannot work.
func (t *TLS) check(field string) error {
	switch {
	case t == nil:
		return fmt.Errorf("remote: %s: %w: none", field, ErrTLSConfig)
	case len(t.Certificate.Certificate) == 0:
		return fmt.Errorf("remote: %s: %w: no certificate (both sides present one)", field, ErrTLSConfig)
	case t.Certificate.PrivateKey == nil:
		return fmt.Errorf("remote: %s: %w: the certificate has no private key", field, ErrTLSConfig)
	case t.CAs == nil:
		return fmt.Errorf("remote: %s: %w: no CAs (peers' certificates must chain to them)", field, ErrTLSConfig)
	}
	return nil
}

// listenRisk checks t (when set) for the option field (NodeOptions.TLS,
// ClientOptions.TLS) and returns what listening beyond loopback exposes:
// without TLS, to whoever reaches the address; with it, to the peers of
// its CAs. what is what they can do ("run its tools").
func (t *TLS) listenRisk(field, what string) (string, error) {
	if t == nil {
		return "without TLS, whoever reaches it can " + what, nil
	}
	if err := t.check(field); err != nil {
		return "", err
	}
	return "peers with a certificate from " + field + ".CAs can " + what, nil
}

// credentials returns the transport credentials of t's server (requiring
// and checking a client certificate) and of its dials (presenting the
// certificate and checking the peer's); insecure ones both when t is nil.
//
// Dials speak TLS 1.2, whose handshake ends only once the server has
// checked the client's certificate: a client the server refuses learns it
// from the handshake (an alert: "bad certificate"). Under TLS 1.3 the
// client's handshake ends first, and the refusal is lost in a write to a
// connection already closed ("broken pipe"). Both versions are offered
// only forward-secret AEAD cipher suites; servers take either version.
func (t *TLS) credentials() (server, dial credentials.TransportCredentials) {
	if t == nil {
		return nil, insecure.NewCredentials()
	}
	// Copies: what the caller changes in t later (a certificate added to
	// its pool, say) does not change what a running peer trusts.
	cert := t.Certificate
	cert.Certificate = make([][]byte, len(t.Certificate.Certificate))
	for i, der := range t.Certificate.Certificate {
		cert.Certificate[i] = append([]byte(nil), der...)
	}
	certs, cas := []tls.Certificate{cert}, t.CAs.Clone()
	server = credentials.NewTLS(&tls.Config{
		Certificates: certs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    cas,
		MinVersion:   tls.VersionTLS12,
		CipherSuites: cipherSuites,
	})
	// gRPC checks the peer's certificate against the host it dials.
	dial = credentials.NewTLS(&tls.Config{
		Certificates: certs,
		RootCAs:      cas,
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   tls.VersionTLS12,
		CipherSuites: cipherSuites,
	})
	return server, dial
}

// cipherSuites are the TLS 1.2 cipher suites of nodes, clients and
// members: forward-secret (ECDHE), authenticated encryption (AEAD).
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// GRPCOptions returns the gRPC options with which the nodes and clients
// of this package speak mutual TLS with t, for a protoactor remote started
// elsewhere (a cluster member's, which cluster.Options.TLS sets up):
// install server with remote.WithServerOptions, beside
// [Guard.ServerOptions] and [PingPolicy], and dial with
// remote.WithDialOptions after [DialOptions], whose credentials (none) it
// replaces. It returns an error wrapping [ErrTLSConfig] when t has no
// certificate, no private key or no CAs.
func (t *TLS) GRPCOptions() (server grpc.ServerOption, dial grpc.DialOption, err error) {
	if err := t.check("TLS"); err != nil {
		return nil, nil, err
	}
	s, d := t.credentials()
	return grpc.Creds(s), grpc.WithTransportCredentials(d), nil
}
