// Package certtest makes a throwaway certificate authority for tests and
// local demos of TLS: a CA, a server certificate it signed for the given
// hosts (IP addresses or DNS names) and a client certificate, written as
// PEM files to a directory. The keys are ECDSA P-256; everything is valid
// for a day. Nothing here is fit for production: the CA's key is thrown
// away, and the files are written 0600 into the caller's directory.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the PEM files Write produced, by path.
type Files struct {
	CA         string // the CA's certificate: the roots a client trusts
	ServerCert string // the server's certificate, for the hosts given
	ServerKey  string
	ClientCert string // a client certificate (CN "paylock") the CA signed
	ClientKey  string
}

// Write creates a CA and the server and client certificates it signed in
// dir; hosts are the server certificate's IP addresses or DNS names
// (127.0.0.1 and localhost when none are given).
func Write(dir string, hosts ...string) (Files, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	f := Files{CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey: filepath.Join(dir, "server-key.pem"), ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey: filepath.Join(dir, "client-key.pem")}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "certtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	server := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	if err := issue(server, ca, caKey, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	client := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "paylock"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return f, issue(client, ca, caKey, f.ClientCert, f.ClientKey)
}

// issue signs tmpl with the CA and writes the certificate and a new key.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", keyDER)
}

func writePEM(path, kind string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("certtest: %w", err)
	}
	return nil
}

// ServerConfig is the TLS configuration of a server presenting f's server
// certificate; with clientAuth, it also demands a client certificate the
// CA signed.
func (f Files) ServerConfig(clientAuth bool) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("certtest: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		pemCA, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("certtest: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		tc.ClientCAs.AppendCertsFromPEM(pemCA)
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
