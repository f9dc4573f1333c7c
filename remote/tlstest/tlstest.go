// Package tlstest makes certificate authorities and certificates for
// tests of mutual TLS (remote.TLS): each CA is made in memory, with
// crypto/x509, and issues certificates for 127.0.0.1 and localhost that
// are valid for both server and client authentication, as the peers of a
// protoactor remote need.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/remote"
)

// CA is a certificate authority made for a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

// serials numbers the certificates made by this process.
var serials atomic.Int64

// NewCA returns a new CA named name; it fails t when it cannot.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, key := sign(t, tmpl, nil, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, der: der}
}

// template is the template of a certificate named name, valid from an
// hour ago for a day.
func template(name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

// sign makes a key and the certificate of tmpl for it, signed by parent
// with parentKey (nil: self-signed), and returns the certificate (DER)
// and the key.
func sign(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// Pool returns a pool holding ca's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// PEM returns ca's certificate, PEM-encoded.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Issue returns a certificate signed by ca for 127.0.0.1 and localhost,
// named name, valid for server and client authentication, with its key.
func (ca *CA) Issue(t testing.TB, name string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.issuePEM(t, name)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TLS returns the remote.TLS of a peer named name whose certificate ca
// issues and whose peers' certificates must chain to ca.
func (ca *CA) TLS(t testing.TB, name string) *remote.TLS {
	t.Helper()
	return &remote.TLS{Certificate: ca.Issue(t, name), CAs: ca.Pool()}
}

// Files is where WriteFiles wrote a peer's PEM files.
type Files struct{ Cert, Key, CA string }

// WriteFiles writes, in dir, the PEM files of a peer named name: its
// certificate from ca (NAME.crt), its key (NAME.key), and the CAs its
// peers' certificates must chain to, cas (NAME-ca.pem; ca when none).
func (ca *CA) WriteFiles(t testing.TB, dir, name string, cas ...*CA) Files {
	t.Helper()
	if len(cas) == 0 {
		cas = []*CA{ca}
	}
	certPEM, keyPEM := ca.issuePEM(t, name)
	var caPEM []byte
	for _, c := range cas {
		caPEM = append(caPEM, c.PEM()...)
	}
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, name+"-ca.pem")}
	for path, b := range map[string][]byte{f.Cert: certPEM, f.Key: keyPEM, f.CA: caPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// issuePEM returns a certificate from ca for name and its key, PEM-encoded.
func (ca *CA) issuePEM(t testing.TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.DNSNames = []string{"localhost"}
	der, key := sign(t, tmpl, ca.cert, ca.key)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
