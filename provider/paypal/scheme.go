package paypal

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paylock/paylock/provider"
	"github.com/paylock/paylock/signature"
)

// Scheme is PayPal's webhook signature (self-verification, as PayPal's
// SDKs do it), registered with package signature by this package:
//
//   - PAYPAL-TRANSMISSION-SIG is the base64 RSA PKCS#1 v1.5 SHA-256
//     signature (PAYPAL-AUTH-ALGO SHA256withRSA) of
//     "<PAYPAL-TRANSMISSION-ID>|<PAYPAL-TRANSMISSION-TIME>|<webhook id>|<CRC-32 of the raw body, unsigned decimal>";
//   - the key is that of the X.509 certificate at PAYPAL-CERT-URL,
//     fetched only over https from the source's cert_hosts (Configure;
//     PayPal's, DefaultCertHosts, by default),
//     chained to the system roots and issued for CertHost, cached by URL
//     until its NotAfter;
//   - the source's secret is its webhook id, the id PayPal gave the
//     endpoint: each entry of secrets_env is one (a rotation lists both);
//   - PAYPAL-TRANSMISSION-TIME (RFC 3339) is checked against the
//     verifier's tolerance: the replay window.
//
// The fetch happens inside Verify, which signature.Check gives no
// context: it has its own deadline (5s) and size bound (64 KiB).
const Scheme signature.Scheme = "paypal"

// Header names, canonical.
const (
	HeaderTransmissionID   = "Paypal-Transmission-Id"
	HeaderTransmissionTime = "Paypal-Transmission-Time"
	HeaderTransmissionSig  = "Paypal-Transmission-Sig"
	HeaderCertURL          = "Paypal-Cert-Url"
	HeaderAuthAlgo         = "Paypal-Auth-Algo"
)

// AuthAlgo is the one algorithm PayPal signs with.
const AuthAlgo = "SHA256withRSA"

// maxURLBytes bounds PAYPAL-CERT-URL.
const maxURLBytes = 512

var (
	certsMu sync.RWMutex
	// certsConfig is the fetchers' configuration but for their hosts:
	// PayPal's (the zero value) but in the package's tests.
	certsConfig fetchConfig
	// certs is the fetcher of a source without cert_hosts.
	certs = newFetcher(fetchConfig{})
	// byHosts are the fetchers of sources with cert_hosts, one per
	// distinct list (its hosts joined by ","), so that sources naming the
	// same hosts share a cache.
	byHosts = map[string]*fetcher{}
)

// setFetchConfig makes c the configuration of every fetcher (the tests'
// roots and hosts) and drops the fetchers made before.
func setFetchConfig(c fetchConfig) {
	certsMu.Lock()
	defer certsMu.Unlock()
	certsConfig, certs, byHosts = c, newFetcher(c), map[string]*fetcher{}
}

// currentFetcher is the fetcher of a source without cert_hosts.
func currentFetcher() *fetcher {
	certsMu.RLock()
	defer certsMu.RUnlock()
	return certs
}

// fetcherFor is the fetcher restricted to hosts, made once per list.
func fetcherFor(hosts []string) *fetcher {
	key := strings.Join(hosts, ",")
	certsMu.Lock()
	defer certsMu.Unlock()
	f, ok := byHosts[key]
	if !ok {
		c := certsConfig
		c.hosts = hosts
		f = newFetcher(c)
		byHosts[key] = f
	}
	return f
}

// configure is the scheme's SchemeSpec.Configure: a source's cert_hosts
// (checked as New checks it) restricts its verifier's fetches to those
// hosts; without it, the verifier is the spec's (DefaultCertHosts).
func configure(settings map[string]json.RawMessage) (func(signature.Check) (signature.Result, error), func(signature.Check) error, error) {
	raw, ok := settings[KeyCertHosts]
	if !ok {
		return nil, nil, nil
	}
	hosts, err := parseCertHosts(raw)
	if err != nil {
		return nil, nil, &provider.SettingError{Key: KeyCertHosts, Err: err}
	}
	f := fetcherFor(hosts)
	return func(c signature.Check) (signature.Result, error) { return verify(f, c) },
		func(c signature.Check) error { return precheck(f, c) }, nil
}

func init() {
	signature.RegisterScheme(signature.SchemeSpec{
		Name:        Scheme,
		ParseSecret: func(entry string) ([]byte, []byte, error) { return []byte(entry), nil, nil },
		KeyFormat:   "the webhook id as PayPal shows it",
		MinKeyBytes: 8,
		Timestamped: true,
		Verify:      func(c signature.Check) (signature.Result, error) { return verify(currentFetcher(), c) },
		Precheck:    func(c signature.Check) error { return precheck(currentFetcher(), c) },
		Sign:        sign,
		Configure:   configure,
	})
}

// transmission is a delivery's signature headers, checked for form.
type transmission struct {
	id, time, certURL string
	sig               []byte
}

// precheck checks c's headers as verify does, fetching nothing.
func precheck(f *fetcher, c signature.Check) error {
	_, err := headersOf(f, c.Header)
	return err
}

// headersOf reads and checks the five headers; the cert URL must be on
// f's allowlist (nothing is fetched here).
func headersOf(f *fetcher, h http.Header) (transmission, error) {
	var t transmission
	var err error
	if t.id, err = signature.SingleHeader(h, HeaderTransmissionID, signature.MaxHeaderBytes); err != nil {
		return t, err
	}
	if strings.Contains(t.id, "|") {
		return t, signature.Malformed("%s: holds |", HeaderTransmissionID)
	}
	if t.time, err = signature.SingleHeader(h, HeaderTransmissionTime, signature.MaxHeaderBytes); err != nil {
		return t, err
	}
	algo, err := signature.SingleHeader(h, HeaderAuthAlgo, signature.MaxHeaderBytes)
	if err != nil {
		return t, err
	}
	if algo != AuthAlgo {
		return t, signature.Malformed("%s: not %s", HeaderAuthAlgo, AuthAlgo)
	}
	sig, err := signature.SingleHeader(h, HeaderTransmissionSig, signature.MaxHeaderBytes)
	if err != nil {
		return t, err
	}
	if t.sig, err = base64.StdEncoding.DecodeString(sig); err != nil || len(t.sig) == 0 {
		return t, signature.Malformed("%s: not base64", HeaderTransmissionSig)
	}
	if t.certURL, err = signature.SingleHeader(h, HeaderCertURL, maxURLBytes); err != nil {
		return t, err
	}
	if _, err := f.allowed(t.certURL); err != nil {
		return t, fmt.Errorf("%w: %w", signature.ErrNoMatch, err)
	}
	return t, nil
}

// signedString is what PayPal signs for webhookID.
func signedString(t transmission, webhookID []byte, body []byte) []byte {
	return fmt.Appendf(nil, "%s|%s|%s|%d", t.id, t.time, webhookID, crc32.ChecksumIEEE(body))
}

// verify checks the headers and the time, fetches the certificate with
// f, and finds the webhook id (secret) whose signed string the signature
// is of.
func verify(f *fetcher, c signature.Check) (signature.Result, error) {
	t, err := headersOf(f, c.Header)
	if err != nil {
		return signature.Result{}, err
	}
	at, err := time.Parse(time.RFC3339Nano, t.time)
	if err != nil {
		return signature.Result{}, signature.Malformed("%s: not an RFC 3339 time", HeaderTransmissionTime)
	}
	if _, err := c.Time(at.Unix()); err != nil {
		return signature.Result{}, err
	}
	pub, err := f.key(t.certURL)
	if err != nil {
		return signature.Result{}, fmt.Errorf("%w: %w", signature.ErrNoMatch, err)
	}
	// Match compares 32-byte values: the signature's digest stands for
	// it, and a webhook id "MACs" to it only when the RSA signature
	// verifies over that id's signed string.
	marker := sha256.Sum256(t.sig)
	i := c.Match([][]byte{marker[:]}, func(webhookID []byte) []byte {
		d := sha256.Sum256(signedString(t, webhookID, c.Body))
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, d[:], t.sig) != nil {
			return make([]byte, sha256.Size)
		}
		return marker[:]
	})
	if i < 0 {
		return signature.Result{}, signature.ErrNoMatch
	}
	return signature.Result{SecretIndex: i}, nil
}

// ErrNoSigner: PayPal signs with its own private key, which paylock does
// not have; Sign works only once a signer is set (the package's tests).
var ErrNoSigner = errors.New("paypal: signing needs PayPal's private key (only the package's tests set a test key)")

// signer is the test key pair's private key and the URL of its
// certificate; nil outside tests.
var signer struct {
	sync.RWMutex
	key     *rsa.PrivateKey
	certURL string
}

// sign is what PayPal sends, signed with the test signer: id is the
// transmission id (a fresh one when empty).
func sign(webhookID, _ []byte, id string, ts time.Time, body []byte) (http.Header, []byte, error) {
	signer.RLock()
	key, certURL := signer.key, signer.certURL
	signer.RUnlock()
	if key == nil {
		return nil, nil, ErrNoSigner
	}
	if id == "" {
		id = "paylock-" + strconv.FormatInt(ts.UnixNano(), 36)
	}
	t := transmission{id: id, time: ts.UTC().Format(time.RFC3339)}
	d := sha256.Sum256(signedString(t, webhookID, body))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, d[:])
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	h.Set(HeaderTransmissionID, t.id)
	h.Set(HeaderTransmissionTime, t.time)
	h.Set(HeaderTransmissionSig, base64.StdEncoding.EncodeToString(sig))
	h.Set(HeaderCertURL, certURL)
	h.Set(HeaderAuthAlgo, AuthAlgo)
	return h, body, nil
}
