package paypal

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors of the certificate fetch, wrapped (with signature.ErrNoMatch) by
// Verify's error, so a test tells them apart with errors.Is.
var (
	// ErrCertURL: PAYPAL-CERT-URL is not an https URL on an allowed host
	// (no userinfo, no port the allowlist does not name). Nothing was
	// fetched.
	ErrCertURL = errors.New("paypal: certificate URL not allowed")
	// ErrCertFetch: the certificate could not be fetched (status,
	// redirect off the allowlist, size, timeout).
	ErrCertFetch = errors.New("paypal: certificate fetch failed")
	// ErrCert: the fetched certificate is not PayPal's (no PEM, no RSA
	// key, expired, not chained to the roots, not for CertHost).
	ErrCert = errors.New("paypal: certificate refused")
)

// DefaultCertHosts are the hosts PayPal serves its webhook certificates
// from: the only hosts PAYPAL-CERT-URL may name (an SSRF guard: the URL
// is the sender's, so a free URL would make paylock fetch anything).
var DefaultCertHosts = []string{"api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"}

// parseCertHosts reads a cert_hosts setting: a non-empty JSON list of
// hosts, each a host name or host:port (a port 1-65535), with no scheme,
// path, query or userinfo; lower-cased. Its error never quotes more than
// the host it refuses.
func parseCertHosts(raw json.RawMessage) ([]string, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("must be a list of hosts (host or host:port)")
	}
	if len(list) == 0 {
		return nil, errors.New("must name at least one host")
	}
	hosts := make([]string, 0, len(list))
	for i, h := range list {
		h = strings.ToLower(strings.TrimSpace(h))
		name, port := h, ""
		if j := strings.LastIndexByte(h, ':'); j >= 0 {
			name, port = h[:j], h[j+1:]
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
				return nil, fmt.Errorf("host %d of %d: %q has no valid port", i+1, len(list), h)
			}
		}
		if len(name) > 253 || !hostName.MatchString(name) {
			return nil, fmt.Errorf("host %d of %d: %q is not a host name (host or host:port, no scheme, path or userinfo)", i+1, len(list), h)
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, nil
}

// hostName is a DNS host name: dot-separated labels of letters, digits
// and inner hyphens, at most 253 characters.
var hostName = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

// CertHost is the name PayPal's webhook certificate is issued for.
const CertHost = "messageverificationcerts.paypal.com"

// Bounds of a fetch.
const (
	maxCertBytes = 64 << 10
	fetchTimeout = 5 * time.Second
	maxCached    = 64
	maxRedirects = 3
)

// fetcher fetches and checks PayPal's certificates, caching each good one
// by URL until its NotAfter. signature.Check carries no context, so the
// fetch has its own deadline (fetchTimeout) rather than the request's.
type fetcher struct {
	hosts     []string       // allowed hosts, lower-case, host or host:port
	certRoots *x509.CertPool // roots the certificate must chain to; nil: the system's
	certHost  string         // the name the leaf must be valid for
	client    *http.Client
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	key      *rsa.PublicKey
	notAfter time.Time
}

// fetchConfig configures a fetcher; zero values are PayPal's.
type fetchConfig struct {
	hosts     []string
	certRoots *x509.CertPool
	tlsRoots  *x509.CertPool // roots of the HTTPS connection; nil: the system's
	certHost  string
}

func newFetcher(c fetchConfig) *fetcher {
	f := &fetcher{hosts: DefaultCertHosts, certRoots: c.certRoots, certHost: CertHost, now: time.Now, cache: map[string]cached{}}
	if c.hosts != nil {
		f.hosts = c.hosts
	}
	if c.certHost != "" {
		f.certHost = c.certHost
	}
	tr := &http.Transport{
		Proxy:                 nil,
		TLSClientConfig:       &tls.Config{RootCAs: c.tlsRoots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   fetchTimeout,
		ResponseHeaderTimeout: fetchTimeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       time.Minute,
	}
	f.client = &http.Client{Transport: tr, Timeout: fetchTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("%w: too many redirects", ErrCertFetch)
		}
		if _, err := f.allowed(req.URL.String()); err != nil {
			return fmt.Errorf("%w: redirected off the allowlist", ErrCertFetch)
		}
		return nil
	}}
	return f
}

// allowed parses raw and checks it names an allowed host over https,
// without userinfo, fragment or a port the allowlist does not name.
func (f *fetcher) allowed(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Scheme != "https", u.Opaque != "", u.User != nil, u.Fragment != "", u.Host == "":
		return nil, ErrCertURL
	case !slices.Contains(f.hosts, strings.ToLower(u.Host)):
		return nil, ErrCertURL
	}
	return u, nil
}

// key returns the RSA public key of the certificate at raw: from the
// cache, or fetched and checked. A URL off the allowlist is refused
// before any request.
func (f *fetcher) key(raw string) (*rsa.PublicKey, error) {
	u, err := f.allowed(raw)
	if err != nil {
		return nil, err
	}
	now := f.now()
	f.mu.Lock()
	c, ok := f.cache[u.String()]
	f.mu.Unlock()
	if ok && now.Before(c.notAfter) {
		return c.key, nil
	}
	pemBytes, err := f.get(u)
	if err != nil {
		return nil, err
	}
	leaf, err := f.check(pemBytes, now)
	if err != nil {
		return nil, err
	}
	f.store(u.String(), leaf)
	return leaf.PublicKey.(*rsa.PublicKey), nil
}

// get fetches u: 200, at most maxCertBytes.
func (f *fetcher) get(u *url.URL) ([]byte, error) {
	res, err := f.client.Get(u.String())
	if err != nil {
		if errors.Is(err, ErrCertFetch) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %T", ErrCertFetch, errors.Unwrap(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: status %d", ErrCertFetch, res.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxCertBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body", ErrCertFetch)
	}
	if len(b) > maxCertBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCertFetch, maxCertBytes)
	}
	return b, nil
}

// check parses the PEM chain (leaf first, then intermediates) and
// verifies the leaf: an RSA key, valid now, for certHost, chained to
// certRoots.
func (f *fetcher) check(pemBytes []byte, now time.Time) (*x509.Certificate, error) {
	var certs []*x509.Certificate
	for block, rest := pem.Decode(pemBytes); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: not an X.509 certificate", ErrCert)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%w: no PEM certificate", ErrCert)
	}
	leaf := certs[0]
	if _, ok := leaf.PublicKey.(*rsa.PublicKey); !ok {
		return nil, fmt.Errorf("%w: not an RSA key", ErrCert)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: f.certHost, Roots: f.certRoots, Intermediates: inter,
		CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCert, err)
	}
	return leaf, nil
}

// store caches leaf's key under u until its NotAfter, evicting expired
// entries, then any one, when the cache is full.
func (f *fetcher) store(u string, leaf *x509.Certificate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if len(f.cache) >= maxCached {
		for k, c := range f.cache {
			if !now.Before(c.notAfter) {
				delete(f.cache, k)
			}
		}
	}
	for k := range f.cache {
		if len(f.cache) < maxCached {
			break
		}
		delete(f.cache, k)
	}
	f.cache[u] = cached{key: leaf.PublicKey.(*rsa.PublicKey), notAfter: leaf.NotAfter}
}
