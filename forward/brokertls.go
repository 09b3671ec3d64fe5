package forward

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
)

// ErrPlaintextCredentials is what opening a broker sink returns when its
// URL gives credentials (a user, a password, a token, a creds file) and
// no TLS, without insecure=true: they would cross the network in clear.
var ErrPlaintextCredentials = errors.New("forward: credentials over plaintext")

// brokerTLS reads the TLS parameters of a broker URL's query (tls,
// tls_ca, tls_cert, tls_key, tls_server_name) and returns the connection's
// TLS configuration, or nil for plaintext. TLS is on with tls=true, or
// when the worker has a TLS configuration (SinkConfig.TLS) and the URL
// does not say tls=false; the configuration starts from SinkConfig.TLS
// (cloned) or Go's defaults (the system's roots), at least TLS 1.2.
// tls_ca replaces the roots with the PEM file's certificates, tls_cert and
// tls_key (both or neither) are a client certificate, and
// tls_server_name the name the brokers' certificates must carry (default:
// each broker's host). The files are read now: a missing or bad one is an
// error naming the parameter.
func brokerTLS(q url.Values, cfg SinkConfig) (*tls.Config, error) {
	on := cfg.TLS != nil
	if v := q.Get("tls"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, errors.New("tls: want true or false")
		}
		on = b
	}
	ca, cert, key, name := q.Get("tls_ca"), q.Get("tls_cert"), q.Get("tls_key"), q.Get("tls_server_name")
	if !on {
		for _, p := range []struct{ name, v string }{{"tls_ca", ca}, {"tls_cert", cert}, {"tls_key", key}, {"tls_server_name", name}} {
			if p.v != "" {
				return nil, fmt.Errorf("%s: needs tls=true", p.name)
			}
		}
		return nil, nil
	}
	tc := &tls.Config{}
	if cfg.TLS != nil {
		tc = cfg.TLS.Clone()
	}
	tc.MinVersion = max(tc.MinVersion, tls.VersionTLS12)
	if ca != "" {
		pemCA, err := os.ReadFile(ca) // #nosec G304: the operator's file
		if err != nil {
			return nil, fmt.Errorf("tls_ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pemCA) {
			return nil, fmt.Errorf("tls_ca: no PEM certificate in %s", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("tls_cert and tls_key: give both (a client certificate) or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls_cert, tls_key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if name != "" {
		tc.ServerName = name
	}
	return tc, nil
}

// refusePlaintextCredentials returns ErrPlaintextCredentials (saying what
// to add) when the sink would send credentials without TLS and the URL
// does not say insecure=true.
func refusePlaintextCredentials(q url.Values, tc *tls.Config, credentials bool) error {
	insecure := false
	if v := q.Get("insecure"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("insecure: want true or false")
		}
		insecure = b
	}
	if credentials && tc == nil && !insecure {
		return fmt.Errorf("%w: add tls=true (tls_ca=FILE for a private CA), or insecure=true to send them in clear", ErrPlaintextCredentials)
	}
	return nil
}
