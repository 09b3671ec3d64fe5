package paypal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test PKI: a CA of the tests' own standing for the system roots, the
// leaf it issues for CertHost (the signer's key), and a leaf of another
// CA with the same name (a wrong certificate).
var pki struct {
	caPool     *x509.CertPool
	leafPEM    []byte
	otherPEM   []byte
	key        *rsa.PrivateKey
	srv        *httptest.Server // allowlisted
	offlist    *httptest.Server // not allowlisted
	mu         sync.Mutex
	hits       map[string]int // path → requests, both servers
	sampleCert string         // URL of leafPEM
}

func hits(path string) int {
	pki.mu.Lock()
	defer pki.mu.Unlock()
	return pki.hits[path]
}

func TestMain(m *testing.M) {
	pki.hits = map[string]int{}
	caKey, ca, caDER := newCA("paylock test CA")
	otherKey, other, _ := newCA("another CA")
	pki.caPool = x509.NewCertPool()
	pki.caPool.AddCert(ca)
	var err error
	if pki.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	pki.leafPEM = append(issue(ca, caKey, &pki.key.PublicKey), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	otherLeaf, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	pki.otherPEM = issue(other, otherKey, &otherLeaf.PublicKey)
	pki.srv = httptest.NewTLSServer(http.HandlerFunc(serve))
	pki.offlist = httptest.NewTLSServer(http.HandlerFunc(serve))
	tlsRoots := x509.NewCertPool()
	tlsRoots.AddCert(pki.srv.Certificate())
	tlsRoots.AddCert(pki.offlist.Certificate())
	u, _ := url.Parse(pki.srv.URL)
	setFetchConfig(fetchConfig{hosts: []string{u.Host}, certRoots: pki.caPool, tlsRoots: tlsRoots})
	pki.sampleCert = pki.srv.URL + "/v1/notifications/certs/CERT-sample"
	signer.key, signer.certURL = pki.key, pki.sampleCert
	code := m.Run()
	pki.srv.Close()
	pki.offlist.Close()
	os.Exit(code)
}

// serve is both test hosts: every request is counted by path.
func serve(w http.ResponseWriter, r *http.Request) {
	pki.mu.Lock()
	pki.hits[r.URL.Path]++
	pki.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/notifications/certs/"):
		_, _ = w.Write(pki.leafPEM)
	case r.URL.Path == "/other":
		_, _ = w.Write(pki.otherPEM)
	case r.URL.Path == "/redirect-off":
		http.Redirect(w, r, pki.offlist.URL+"/v1/notifications/certs/CERT-redirected", http.StatusFound)
	case r.URL.Path == "/big":
		_, _ = w.Write([]byte(strings.Repeat("A", maxCertBytes+1)))
	default:
		http.NotFound(w, r)
	}
}

func newCA(name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	return key, c, der
}

// issue is a PEM leaf for CertHost with pub, signed by ca.
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, pub *rsa.PublicKey) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: CertHost}, DNSNames: []string{CertHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
